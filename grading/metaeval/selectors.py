"""Selectors for the meta-evaluation: physician labels and a run's grades as numpy arrays.

An item is one (response, consensus criterion attached to its conversation). A run's
meta-evaluation covers the items it graded, or tried to grade, that at least one counted
physician labelled: physicians and grader are compared on the same items, so the grader's
rank among physicians means something even for a run that graded only part of the labels.
A failed grade leaves the item in (physicians still compare with each other there) without
a grader label. Labels of physicians whose status is `removed` are left out everywhere.

Everything is read with values_list in a fixed number of queries, whatever the data size.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import numpy as np
from django.db.models import Count, Exists, Max, OuterRef, Q

from annotation.models import CantJudge, ConsensusCriterion, Criterion, Physician, PhysicianLabel
from grading.metaeval.agreement import MetaEvalLabels
from grading.models import Grade, Response, Run
from healthbench_web.bulk import chunks


def labels_fingerprint() -> str:
    """Changes when physician labels are added, deleted or flipped: one aggregate over the
    labels table (tens of thousands of rows at paper size: a few milliseconds)."""
    stats = PhysicianLabel.objects.aggregate(n=Count("id"), last=Max("id"), met=Count("id", filter=Q(met=True)))
    # "Can't judge" answers are counted in the report, so a new one is a new report too.
    unsure = CantJudge.objects.filter(consensus_criterion__isnull=True).aggregate(n=Count("id"), last=Max("id"))
    return f"{stats['n']}-{stats['last'] or 0}-{stats['met']}-{unsure['n']}-{unsure['last'] or 0}"


@dataclass(frozen=True)
class RunLabels:
    """The physician labels and grader labels of one run's meta-evaluation."""

    run: Run
    labels: MetaEvalLabels
    # Per item: 1.0 met, 0.0 not met, NaN where the grade failed.
    grader: np.ndarray
    # Per item, the stored ids, to look items up again for display.
    response_id: np.ndarray
    criterion_id: np.ndarray
    # Repeated listings of one physician on one item that an import stored as one label
    # (PhysicianLabel.repeats): the reference would count each as a further pair.
    labels_merged: int = 0
    # "Can't judge" answers on the consensus criteria this run graded: stored, never labels.
    cant_judge: int = 0

    @property
    def n_items(self) -> int:
        return self.labels.n_items

    @property
    def n_missing(self) -> int:
        return int(np.isnan(self.grader).sum())


def _counted_labels():
    return PhysicianLabel.objects.filter(criterion__consensus_criterion__isnull=False).exclude(
        physician__status=Physician.Status.REMOVED
    )


def _codes(values: np.ndarray, names: dict[int, str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Code database ids 0..k-1 in the order of their names, so reports list them alphabetically."""
    ids = np.unique(values)
    order = sorted(range(ids.size), key=lambda i: names[int(ids[i])])
    rank = np.empty(ids.size, dtype=np.intp)
    rank[order] = np.arange(ids.size)
    return rank[np.searchsorted(ids, values)], tuple(names[int(ids[i])] for i in order)


def _physician_names(ids: list[int]) -> dict[int, str]:
    # A physician with a login is shown by username; an anonymized one by the file's id.
    names: dict[int, str] = {}
    for chunk in chunks(ids):
        for pk, username, anonymized_id in Physician.objects.filter(id__in=chunk).values_list(
            "id", "user__username", "anonymized_id"
        ):
            names[pk] = username or anonymized_id or f"physician {pk}"
    return names


def run_labels(*, run: Run) -> RunLabels:
    """Build the metaeval arrays for `run` in four queries."""
    graded = Grade.objects.filter(run=run, response_id=OuterRef("response_id"), criterion_id=OuterRef("criterion_id"))
    rows = (
        _counted_labels()
        .filter(Exists(graded))
        .values_list(
            "response_id", "criterion_id", "physician_id", "criterion__consensus_criterion_id", "met", "repeats"
        )
    )
    table = np.array(list(rows), dtype=np.int64).reshape(-1, 6)
    pairs, inverse = np.unique(table[:, :2], axis=0, return_inverse=True)
    item = inverse.reshape(-1)
    n_items = pairs.shape[0]

    # Every label of an item carries the item's consensus criterion, so the first will do.
    item_cc = np.zeros(n_items, dtype=np.int64)
    item_cc[item] = table[:, 3]
    cc_names = dict(ConsensusCriterion.objects.filter(id__in=np.unique(item_cc).tolist()).values_list("id", "cluster"))
    category_of_item, category_names = _codes(item_cc, cc_names) if n_items else (item_cc, ())
    physician, physician_ids = (
        _codes(table[:, 2], _physician_names(np.unique(table[:, 2]).tolist())) if n_items else (table[:, 2], ())
    )

    grader = np.full(n_items, np.nan)
    labelled = _counted_labels().filter(response_id=OuterRef("response_id"), criterion_id=OuterRef("criterion_id"))
    grades = list(
        Grade.objects.filter(run=run).filter(Exists(labelled)).values_list("response_id", "criterion_id", "met")
    )
    if grades and n_items:
        # A failed grade has met NULL, which becomes NaN here: no grader label.
        g = np.array(grades, dtype=float)
        at = _find_pairs(pairs, g[:, :2].astype(np.int64))
        found = at >= 0
        grader[at[found]] = g[found, 2]

    labels = MetaEvalLabels(
        item=item,
        category=category_of_item[item],
        physician=physician,
        label=table[:, 4].astype(bool),
        category_names=category_names,
        physician_ids=physician_ids,
        n_items=n_items,
    )
    return RunLabels(
        run=run,
        labels=labels,
        grader=grader,
        response_id=pairs[:, 0],
        criterion_id=pairs[:, 1],
        labels_merged=int(table[:, 5].sum()),
        cant_judge=CantJudge.objects.filter(criterion__consensus_criterion__isnull=False)
        .filter(Exists(graded))
        .count(),
    )


def _find_pairs(sorted_pairs: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Index of each (response, criterion) row of `pairs` in `sorted_pairs` (lexicographic), or -1."""
    # One int64 key per pair keeps the lookup vectorised; ids stay far below 2**31 in practice.
    width = int(max(sorted_pairs[:, 1].max(), pairs[:, 1].max())) + 1
    if max(sorted_pairs[:, 0].max(), pairs[:, 0].max()) >= np.iinfo(np.int64).max // width:
        index = {tuple(p): i for i, p in enumerate(sorted_pairs.tolist())}
        return np.array([index.get(tuple(p), -1) for p in pairs.tolist()], dtype=np.intp)
    keys = sorted_pairs[:, 0] * width + sorted_pairs[:, 1]
    wanted = pairs[:, 0] * width + pairs[:, 1]
    at = np.searchsorted(keys, wanted).clip(max=keys.size - 1)
    return np.where(keys[at] == wanted, at, -1)


def labels_exist() -> bool:
    """Whether any counted physician label is stored (a run of the labelled items can start)."""
    return _counted_labels().exists()


def runs_with_meta_eval() -> list[tuple[Run, int]]:
    """Runs whose grades cover labelled items, newest first, with the number of items covered."""
    labelled = _counted_labels().filter(response_id=OuterRef("response_id"), criterion_id=OuterRef("criterion_id"))
    counts = dict(
        Grade.objects.filter(Exists(labelled))
        .order_by()
        .values("run_id")
        .annotate(n=Count("id"))
        .values_list("run_id", "n")
    )
    runs = Run.objects.filter(id__in=list(counts)).order_by("-created", "-id")
    return [(run, counts[run.id]) for run in runs]


def item_keys(*, response_ids: Iterable[int]) -> dict[int, tuple[str, str]]:
    """response id -> (prompt_id, completion_id), as the public files name an item."""
    keys: dict[int, tuple[str, str]] = {}
    for chunk in chunks(list(dict.fromkeys(int(r) for r in response_ids))):
        for pk, prompt_id, completion_id in Response.objects.filter(id__in=chunk).values_list(
            "id", "conversation__prompt_id", "completion_id"
        ):
            keys[pk] = (prompt_id, completion_id)
    return keys


@dataclass(frozen=True)
class ItemDetail:
    prompt_id: str
    completion_id: str
    messages: list[dict[str, str]]
    response: str
    category: str
    criterion: str
    grade_status: str
    grade_met: bool | None
    explanation: str


def item_details(*, run: Run, items: list[tuple[int, int]]) -> list[ItemDetail]:
    """What a reviewer reads for each (response id, criterion id): three queries for a page."""
    response_ids = sorted({r for r, _ in items})
    criterion_ids = sorted({c for _, c in items})
    responses = {
        r["id"]: r
        for r in Response.objects.filter(id__in=response_ids).values(
            "id", "text", "completion_id", "conversation__prompt_id", "conversation__messages"
        )
    }
    criteria = {
        c["id"]: c
        for c in Criterion.objects.filter(id__in=criterion_ids).values("id", "text", "consensus_criterion__cluster")
    }
    grades = {
        (g["response_id"], g["criterion_id"]): g
        for g in Grade.objects.filter(run=run, response_id__in=response_ids, criterion_id__in=criterion_ids).values(
            "response_id", "criterion_id", "status", "met", "explanation", "criterion_text"
        )
    }
    out = []
    for response_id, criterion_id in items:
        response, criterion = responses[response_id], criteria[criterion_id]
        grade = grades.get((response_id, criterion_id), {"status": "", "met": None, "explanation": ""})
        out.append(
            ItemDetail(
                prompt_id=response["conversation__prompt_id"],
                completion_id=response["completion_id"],
                messages=cast(list[dict[str, str]], response["conversation__messages"]),
                response=response["text"],
                category=criterion["consensus_criterion__cluster"],
                # The criterion as the run graded it (its plan), not as it reads now.
                criterion=str(grade.get("criterion_text") or criterion["text"]),
                grade_status=str(grade["status"] or ""),
                grade_met=cast(bool | None, grade["met"]),
                explanation=str(grade["explanation"] or ""),
            )
        )
    return out
