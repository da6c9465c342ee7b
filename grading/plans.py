"""Selectors of a run's plan: what it set out to grade, fixed when it was stored (Run.Plan).

* a run on a subset grades each sample on its conversation's rubric in the frozen version;
* a re-grade grades each response on the items its source run graded it on;
* a run of rubric changes grades the source run's responses on the criteria frozen in
  ``Run.plan_rubric`` at launch;
* a run of the physician-labelled items grades each labelled response on the consensus
  criteria physicians labelled it on, frozen in ``Run.plan_rubric`` at launch;
* an imported run (and one recorded before plans) holds its plan in its stored grades.

Reports count a response's missing grades against the plan, never against the live rubric,
so a rubric edit after a run changes none of its numbers. What the live rubric gained or lost
since a run (``rubric_drift``, from its grades) is read here too: for a run of the changes, and
once per run for its page, which then keeps the counts up to date without the grades (grading.drift).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db.models import Count, IntegerField, TextField
from django.db.models.functions import Cast

from annotation.formats.validation import loads_repaired
from annotation.models import Conversation, Criterion, Physician, PhysicianLabel
from grading.models import Grade, Run
from healthbench_web.bulk import chunks

CLUSTER_TAG = "level:cluster"


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One criterion of a conversation's planned rubric, as it is graded. ``criterion_id`` is
    the live criterion it was frozen from, or None when that criterion was edited or deleted
    since (the frozen text is graded all the same)."""

    criterion_id: int | None
    text: str
    points: int
    tags: list


def only_cluster(run: Run) -> bool:
    subset = run.subset_version.subset if run.subset_version_id is not None else run.subset  # type: ignore[union-attr]
    return subset is not None and subset.only_cluster_criteria


def _key(text: str, points: int, tags: Iterable[str]) -> tuple:
    return (text, int(points), tuple(tags))


def version_rubrics(run: Run, conversation_ids: list[int]) -> dict[int, list[PlanItem]]:
    """Each conversation's rubric in the run's frozen version, matched to the live criteria it
    was frozen from (by text, points and tags, in rubric order)."""
    version = run.subset_version
    if version is None:
        raise ValueError(f"run {run.name!r} has no subset version")
    cluster = only_cluster(run)
    prompt_of = dict(Conversation.objects.filter(id__in=conversation_ids).values_list("id", "prompt_id"))
    snapshot = {entry["prompt_id"]: entry["rubrics"] for entry in version.snapshot}
    live: dict[int, dict[tuple, list[int]]] = {}
    criteria = Criterion.objects.filter(conversation_id__in=conversation_ids)
    if cluster:
        criteria = criteria.filter(level=Criterion.Level.CLUSTER)
    for conversation_id, pk, text, points, tags in criteria.order_by("conversation_id", "position", "id").values_list(
        "conversation_id", "id", "text", "points", "tags"
    ):
        live.setdefault(conversation_id, {}).setdefault(_key(text, points, tags), []).append(pk)
    out: dict[int, list[PlanItem]] = {}
    for conversation_id in conversation_ids:
        rubric = [
            r for r in snapshot.get(prompt_of.get(conversation_id, ""), []) if not cluster or CLUSTER_TAG in r["tags"]
        ]
        ids = live.get(conversation_id, {})
        used: Counter[tuple] = Counter()
        items = []
        for r in rubric:
            key = _key(r["criterion"], r["points"], r["tags"])
            candidates = ids.get(key, [])
            items.append(
                PlanItem(
                    candidates[used[key]] if used[key] < len(candidates) else None,
                    r["criterion"],
                    int(r["points"]),
                    list(r["tags"]),
                )
            )
            used[key] += 1
        out[conversation_id] = items
    return out


def changes_rubrics(run: Run, conversation_ids: Iterable[int]) -> dict[int, list[PlanItem]]:
    """Each conversation's criteria in a rubric-changes run's frozen plan."""
    plan = run.plan_rubric or {}
    return {int(c): [PlanItem(*item) for item in plan.get(str(c), [])] for c in conversation_ids}


def labelled_rubric() -> dict[int, list[list]]:
    """response id -> [[criterion id, text, points, tags], ...]: every (response, criterion)
    that a counted physician labelled (the items of a meta-evaluation), in criterion order.
    Responses without text (a label-only import) are left out: there is nothing to grade."""
    pairs = (
        PhysicianLabel.objects.filter(criterion__consensus_criterion__isnull=False)
        .exclude(physician__status=Physician.Status.REMOVED)
        .exclude(response__text="")
        .values_list("response_id", "criterion_id")
        .distinct()
        .order_by("response_id", "criterion_id")
    )
    by_response: dict[int, list[int]] = {}
    for response_id, criterion_id in pairs:
        by_response.setdefault(response_id, []).append(criterion_id)
    criteria = {}
    for chunk in chunks(sorted({c for ids in by_response.values() for c in ids})):
        criteria.update(
            {
                pk: [pk, text, points, list(tags)]
                for pk, text, points, tags in Criterion.objects.filter(id__in=chunk).values_list(
                    "id", "text", "points", "tags"
                )
            }
        )
    return {r: [criteria[c] for c in ids] for r, ids in by_response.items()}


def labelled_items(run: Run, response_ids: Iterable[int]) -> dict[int, list[PlanItem]]:
    """Each response's criteria in a labelled run's frozen plan."""
    plan = run.plan_rubric or {}
    return {int(r): [PlanItem(*item) for item in plan.get(str(r), [])] for r in response_ids}


def planned_rubrics(run: Run, conversation_ids: list[int]) -> dict[int, list[PlanItem]]:
    """The planned rubric of each conversation, for the plans that name one per conversation."""
    if run.plan == Run.Plan.SUBSET_VERSION:
        return version_rubrics(run, conversation_ids)
    if run.plan == Run.Plan.RUBRIC_CHANGES:
        return changes_rubrics(run, conversation_ids)
    raise ValueError(f"a {run.plan} plan names its items per response, not per conversation")


def version_counts(run: Run) -> dict[str, int]:
    """prompt_id -> criteria planned, for a run on a frozen version."""
    if run.subset_version is None:
        raise ValueError(f"run {run.name!r} has no subset version")
    cluster = only_cluster(run)
    return {
        entry["prompt_id"]: sum(not cluster or CLUSTER_TAG in item["tags"] for item in entry["rubrics"])
        for entry in run.subset_version.snapshot
    }


def source_counts(run: Run, response_ids: list[int]) -> dict[int, int]:
    """response id -> items its source run graded it on, for a re-grade."""
    counts: dict[int, int] = {}
    if run.responses_from_id is None:
        return counts
    for chunk in chunks(response_ids):
        counts.update(
            Grade.objects.filter(run_id=run.responses_from_id, response_id__in=chunk)
            .values_list("response_id")
            .annotate(n=Count("id"))
            .order_by()
        )
    return counts


# --- the live rubric against the plan ------------------------------------------------------


@dataclass
class RubricDrift:
    """How the live rubric of a run's conversations moved since the run was planned."""

    added: int = 0
    edited: int = 0
    deleted: int = 0
    # conversation id -> [[criterion id, text, points, tags], ...]: the added and edited
    # criteria, as they are now (what a run of the changes would grade).
    changes: dict[int, list[list]] = field(default_factory=dict)

    @property
    def moved(self) -> bool:
        return bool(self.added or self.edited or self.deleted)

    def summary(self) -> str:
        """E.g. "3 criteria added, 1 edited since this run"; empty when nothing moved."""
        moves = ((self.added, "added"), (self.edited, "edited"), (self.deleted, "deleted"))
        counts = [(n, what) for n, what in moves if n]
        if not counts:
            return ""
        (first, what), rest = counts[0], counts[1:]
        parts = [f"{first} criteri{'on' if first == 1 else 'a'} {what}", *(f"{n} {w}" for n, w in rest)]
        return ", ".join(parts) + " since this run"


def graded_rubric(run: Run) -> dict[int, dict[object, tuple]]:
    """conversation id -> {criterion id (or ("gone", position)): (text, points, tags)}, the
    items the run's plan holds, as its grades record them."""
    baseline: dict[int, dict[object, tuple]] = {}
    if run.plan == Run.Plan.RUBRIC_CHANGES and run.responses_from is not None:
        baseline = graded_rubric(run.responses_from)
    grades = (
        Grade.objects.filter(run=run)
        .order_by()
        .values_list(
            "response__conversation_id",
            "criterion_id",
            "position",
            "criterion_text",
            Cast("points", IntegerField()),
            Cast("tags", TextField()),
        )
        .distinct()
    )
    for conversation_id, criterion_id, position, text, points, tags in grades:
        key = criterion_id if criterion_id is not None else ("gone", position)
        baseline.setdefault(conversation_id, {})[key] = (text, points, tuple(loads_repaired(tags)))
    return baseline


def drift_cluster(run: Run, baseline: dict[int, dict[object, tuple]]) -> bool:
    """Whether only the live cluster criteria count against the plan: a Consensus run's, or one
    whose graded items all are (an imported Consensus run)."""
    return only_cluster(run) or all(CLUSTER_TAG in item[2] for items in baseline.values() for item in items.values())


def live_rubrics(conversation_ids: Sequence[int], cluster: bool) -> dict[int, list[tuple]]:
    """conversation id -> [(criterion id, text, points, tags), ...], the live rubric in order."""
    criteria = Criterion.objects.filter(conversation_id__in=conversation_ids)
    if cluster:
        criteria = criteria.filter(level=Criterion.Level.CLUSTER)
    live: dict[int, list[tuple]] = {}
    for row in criteria.order_by("conversation_id", "position", "id").values_list(
        "conversation_id", "id", "text", "points", "tags"
    ):
        live.setdefault(row[0], []).append(row[1:])
    return live


def rubric_drift(run: Run) -> RubricDrift:
    """Criteria added, edited or deleted since the run on the conversations it graded."""
    if run.plan == Run.Plan.LABELLED:
        # Its plan is the labelled pairs, not the conversations' rubrics: their other
        # criteria were never part of it, and none of them moved it.
        return RubricDrift()
    baseline = graded_rubric(run)
    drift = RubricDrift()
    if not baseline:
        return drift
    cluster = drift_cluster(run, baseline)
    for chunk in chunks(sorted(baseline)):
        live = live_rubrics(chunk, cluster)
        for conversation_id in chunk:
            planned = baseline[conversation_id]
            now = live.get(conversation_id, [])
            now_ids = {row[0] for row in now}
            drift.deleted += sum(1 for key in planned if key not in now_ids)
            changed = []
            for pk, text, points, tags in now:
                if pk not in planned:
                    drift.added += 1
                elif planned[pk] != _key(text, points, tags):
                    drift.edited += 1
                else:
                    continue
                changed.append([pk, text, points, list(tags)])
            if changed:
                drift.changes[conversation_id] = changed
    return drift


def planned_count(run: Run, response_id: int, conversation_id: int) -> int | None:
    """How many grades the plan holds for one response; None: its grade rows are the plan."""
    if run.plan == Run.Plan.SOURCE_RUN:
        return source_counts(run, [response_id]).get(response_id, 0)
    if run.plan == Run.Plan.SUBSET_VERSION:
        prompt_id = Conversation.objects.values_list("prompt_id", flat=True).get(id=conversation_id)
        return version_counts(run).get(prompt_id, 0)
    if run.plan == Run.Plan.RUBRIC_CHANGES:
        return len((run.plan_rubric or {}).get(str(conversation_id), []))
    if run.plan == Run.Plan.LABELLED:
        return len((run.plan_rubric or {}).get(str(response_id), []))
    return None
