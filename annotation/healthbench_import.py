"""Importing HealthBench eval files into the database: one transaction, merge by prompt_id."""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction

from annotation.healthbench_file import HealthBenchRow, IdealData, RowError, RowInvalid, parse_line
from annotation.models import ConsensusCriterion, Conversation, Criterion, IdealResponse, Subset, SubsetMember
from annotation.rubric_merge import plan_rubric_merge

MAX_ERRORS = 50
SUBSET_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")
# SQLite allows 999 variables per query in old builds: look rows up in chunks below that.
CHUNK = 900


class ImportFailed(Exception):
    def __init__(self, errors: list[RowError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


@dataclass
class ImportSummary:
    rows: int = 0
    conversations_created: int = 0
    conversations_merged: int = 0
    criteria_created: int = 0
    consensus_criteria_created: int = 0
    memberships_created: int = 0
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{self.rows} rows: {self.conversations_created} new conversations, "
            f"{self.conversations_merged} already known, {self.criteria_created} criteria added, "
            f"{self.consensus_criteria_created} consensus criteria added to the catalogue, "
            f"{self.memberships_created} subset memberships added"
        )


def subset_kind(name: str) -> str:
    return name if name in (Subset.Kind.ALL, Subset.Kind.CONSENSUS, Subset.Kind.HARD) else Subset.Kind.CUSTOM


def check_subset_name(name: str) -> None:
    if not SUBSET_NAME.match(name):
        raise ValueError(
            f"subset name {name!r} is not valid: use lowercase letters, digits, '-' and '_', starting with a letter or digit"
        )


def parse_lines(lines: Iterable[bytes]) -> list[HealthBenchRow]:
    """Parse every line; raise ImportFailed listing the errors (up to MAX_ERRORS)."""
    rows: list[HealthBenchRow] = []
    errors: list[RowError] = []
    first_line: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        raw = raw.rstrip(b"\r\n")
        if not raw.strip():
            continue
        try:
            row = parse_line(number, raw)
        except RowInvalid as exc:
            errors.append(exc.error)
        else:
            if row.prompt_id in first_line:
                errors.append(
                    RowError(number, "prompt_id", f"{row.prompt_id!r} already appears on line {first_line[row.prompt_id]}")
                )
            else:
                first_line[row.prompt_id] = number
                rows.append(row)
        if len(errors) >= MAX_ERRORS:
            errors.append(RowError(number, "", f"stopped after {MAX_ERRORS} errors"))
            break
    if errors:
        raise ImportFailed(errors)
    return rows


def import_healthbench_lines(lines: Iterable[bytes], *, subset_name: str | None = None) -> ImportSummary:
    """Import a HealthBench eval file (main, Hard or Consensus) in one transaction.

    Every conversation joins the subset `all`, and `subset_name` when given. A prompt_id that
    is already stored is merged: its criteria are matched, never doubled or dropped.
    """
    if subset_name is not None:
        check_subset_name(subset_name)
    rows = parse_lines(lines)
    with transaction.atomic():
        summary = _store(rows, subset_name)
    return summary


def _existing_ideal(conversation_id: int, ideals: dict[int, IdealResponse]) -> IdealData | None:
    ideal = ideals.get(conversation_id)
    if ideal is None:
        return None
    return IdealData(ideal.text, ideal.group, tuple(ideal.reference_responses))


def _conflicts(row: HealthBenchRow, conversation: Conversation, ideal: IdealData | None) -> list[RowError]:
    checks = [
        ("prompt", row.messages, conversation.messages),
        ("example_tags", row.example_tags, conversation.example_tags),
        ("canary", row.canary, conversation.canary),
        ("ideal_completions_data", row.ideal, ideal),
    ]
    return [
        RowError(row.line, name, f"prompt_id {row.prompt_id!r} is already stored with a different {name}; not merged")
        for name, incoming, stored in checks
        if incoming != stored
    ]


def _catalogue(rows: list[HealthBenchRow], summary: ImportSummary) -> dict[str, ConsensusCriterion]:
    wanted: dict[str, tuple[HealthBenchRow, object]] = {}
    for row in rows:
        for item in row.rubrics:
            if item.cluster and item.cluster not in wanted:
                wanted[item.cluster] = (row, item)
    found = {c.cluster: c for c in ConsensusCriterion.objects.filter(cluster__in=list(wanted))}
    new = [
        ConsensusCriterion(cluster=cluster, text=item.criterion, points=item.points, axis=item.axis, theme=row.theme)
        for cluster, (row, item) in wanted.items()
        if cluster not in found
    ]
    ConsensusCriterion.objects.bulk_create(new)
    summary.consensus_criteria_created = len(new)
    if new:
        found = {c.cluster: c for c in ConsensusCriterion.objects.filter(cluster__in=list(wanted))}
    return found


def _criterion(conversation: Conversation, position: int, item, catalogue: dict) -> Criterion:
    return Criterion(
        conversation=conversation,
        position=position,
        text=item.criterion,
        points=item.points,
        tags=list(item.tags),
        level=item.level,
        axis=item.axis,
        consensus_criterion=catalogue[item.cluster] if item.cluster else None,
    )


def _store(rows: list[HealthBenchRow], subset_name: str | None) -> ImportSummary:
    summary = ImportSummary(rows=len(rows))
    catalogue = _catalogue(rows, summary)
    prompt_ids = [r.prompt_id for r in rows]
    existing: dict[str, Conversation] = {}
    for start in range(0, len(prompt_ids), CHUNK):
        for c in Conversation.objects.filter(prompt_id__in=prompt_ids[start : start + CHUNK]):
            existing[c.prompt_id] = c
    existing_ids = [c.id for c in existing.values()]
    stored_criteria: dict[int, list[Criterion]] = {}
    ideals: dict[int, IdealResponse] = {}
    for start in range(0, len(existing_ids), CHUNK):
        chunk = existing_ids[start : start + CHUNK]
        for criterion in Criterion.objects.filter(conversation_id__in=chunk).order_by("conversation_id", "position", "id"):
            stored_criteria.setdefault(criterion.conversation_id, []).append(criterion)
        for ideal in IdealResponse.objects.filter(conversation_id__in=chunk, from_dataset=True):
            ideals[ideal.conversation_id] = ideal

    errors: list[RowError] = []
    new_conversations: list[tuple[HealthBenchRow, Conversation]] = []
    new_criteria: list[Criterion] = []
    moved: list[Criterion] = []
    for row in rows:
        conversation = existing.get(row.prompt_id)
        if conversation is None:
            conversation = Conversation(
                prompt_id=row.prompt_id,
                messages=row.messages,
                example_tags=row.example_tags,
                theme=row.theme,
                canary=row.canary,
            )
            new_conversations.append((row, conversation))
            continue
        summary.conversations_merged += 1
        errors.extend(_conflicts(row, conversation, _existing_ideal(conversation.id, ideals)))
        stored = stored_criteria.get(conversation.id, [])
        plan = plan_rubric_merge([(c.text, c.points, tuple(c.tags)) for c in stored], [i.key() for i in row.rubrics])
        if plan.conflict:
            summary.warnings.append(
                f"line {row.line}: prompt_id {row.prompt_id!r} had criteria this row lacks; kept them after the row's criteria"
            )
        if not plan.changed:
            continue
        for position, (kind, index) in enumerate(plan.order):
            if kind == "new":
                new_criteria.append(_criterion(conversation, position, row.rubrics[index], catalogue))
            elif stored[index].position != position:
                stored[index].position = position
                moved.append(stored[index])
    if errors:
        raise ImportFailed(errors[: MAX_ERRORS])

    Conversation.objects.bulk_create([c for _, c in new_conversations], batch_size=500)
    for row, conversation in new_conversations:
        new_criteria.extend(_criterion(conversation, i, item, catalogue) for i, item in enumerate(row.rubrics))
    Criterion.objects.bulk_create(new_criteria, batch_size=2000)
    Criterion.objects.bulk_update(moved, ["position"], batch_size=1000)
    IdealResponse.objects.bulk_create(
        [
            IdealResponse(
                conversation=conversation,
                text=row.ideal.completion,
                group=row.ideal.group,
                reference_responses=list(row.ideal.ref_completions),
                condition=IdealResponse.Condition.WITH_REFERENCE
                if row.ideal.ref_completions
                else IdealResponse.Condition.NO_REFERENCE,
                from_dataset=True,
            )
            for row, conversation in new_conversations
            if row.ideal is not None
        ],
        batch_size=500,
    )
    summary.conversations_created = len(new_conversations)
    summary.criteria_created = len(new_criteria)

    conversation_ids = [existing[r.prompt_id].id if r.prompt_id in existing else None for r in rows]
    by_prompt = {c.prompt_id: c.id for _, c in new_conversations}
    conversation_ids = [cid if cid is not None else by_prompt[r.prompt_id] for cid, r in zip(conversation_ids, rows)]
    for name in ["all"] + ([subset_name] if subset_name and subset_name != "all" else []):
        summary.memberships_created += _add_members(name, conversation_ids)
    return summary


def _add_members(name: str, conversation_ids: list[int]) -> int:
    subset, _ = Subset.objects.get_or_create(name=name, defaults={"kind": subset_kind(name)})
    present = set()
    for start in range(0, len(conversation_ids), CHUNK):
        present.update(
            SubsetMember.objects.filter(
                subset=subset, conversation_id__in=conversation_ids[start : start + CHUNK]
            ).values_list("conversation_id", flat=True)
        )
    new = [SubsetMember(subset=subset, conversation_id=cid) for cid in conversation_ids if cid not in present]
    SubsetMember.objects.bulk_create(new, batch_size=2000)
    return len(new)
