"""Importing HealthBench eval files into the database: one transaction, merge by prompt_id."""

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from annotation.formats.healthbench import HealthBenchRow, IdealData, RowError, RowInvalid, RubricItem, parse_line
from annotation.formats.rubric_merge import merge_key, plan_rubric_merge
from annotation.formats.validation import NO_ROWS, FileRefused, LineTooLong, numbered_lines
from annotation.models import ConsensusCriterion, Conversation, Criterion, IdealResponse, Subset, SubsetMember
from healthbench_web.bulk import chunks, db_json, db_now, insert_rows, new_codes

MAX_ERRORS = 50
SUBSET_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")


class ImportFailed(FileRefused):
    errors: list[RowError]


@dataclass
class ImportSummary:
    rows: int = 0
    conversations_created: int = 0
    conversations_merged: int = 0
    criteria_created: int = 0
    consensus_criteria_created: int = 0
    conversations_completed: int = 0
    memberships_created: int = 0
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{self.rows} rows: {self.conversations_created} new conversations, "
            f"{self.conversations_merged} already known ({self.conversations_completed} completed with "
            f"their dataset fields), "
            f"{self.criteria_created} criteria added, "
            f"{self.consensus_criteria_created} consensus criteria added to the catalogue, "
            f"{self.memberships_created} subset memberships added"
        )


def subset_kind(name: str) -> str:
    return name if name in (Subset.Kind.ALL, Subset.Kind.CONSENSUS, Subset.Kind.HARD) else Subset.Kind.CUSTOM


def check_subset_name(name: str) -> None:
    if not SUBSET_NAME.match(name):
        raise ValueError(
            f"subset name {name!r} is not valid: use lowercase letters, digits, '-' and '_', starting "
            f"with a letter or digit"
        )


def parse_lines(lines: Iterable[bytes | LineTooLong]) -> list[HealthBenchRow]:
    """Parse every line; raise ImportFailed listing the errors (up to MAX_ERRORS)."""
    rows: list[HealthBenchRow] = []
    errors: list[RowError] = []
    first_line: dict[str, int] = {}
    number = 0
    for number, raw in numbered_lines(lines):
        try:
            row = parse_line(number, raw)
        except RowInvalid as exc:
            errors.append(exc.error)
        else:
            if row.prompt_id in first_line:
                errors.append(
                    RowError(
                        number, "prompt_id", f"{row.prompt_id!r} already appears on line {first_line[row.prompt_id]}"
                    )
                )
            else:
                first_line[row.prompt_id] = number
                rows.append(row)
        if len(errors) >= MAX_ERRORS:
            errors.append(RowError(number, "", f"stopped after {MAX_ERRORS} errors"))
            break
    if not number:
        errors.append(RowError(0, "", NO_ROWS))
    if errors:
        raise ImportFailed(errors)
    return rows


def import_healthbench_lines(lines: Iterable[bytes | LineTooLong], *, subset_name: str | None = None) -> ImportSummary:
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


def _is_bare(conversation: Conversation, ideal: IdealData | None) -> bool:
    """Created from a source without dataset fields (a meta-eval file): the row may fill them in."""
    return conversation.example_tags == [] and ideal is None


def _conflicts(row: HealthBenchRow, conversation: Conversation, ideal: IdealData | None) -> list[RowError]:
    checks: list[tuple[str, Any, Any]]
    if _is_bare(conversation, ideal):
        # A conversation stored from a label-only meta-eval row has no messages yet: the row brings them.
        checks = [("prompt", row.messages, conversation.messages)] if conversation.messages else []
        return _differences(row, checks)
    checks = [
        ("prompt", row.messages, conversation.messages),
        ("example_tags", row.example_tags, conversation.example_tags),
        ("canary", row.canary, conversation.canary),
        ("ideal_completions_data", row.ideal, ideal),
    ]
    return _differences(row, checks)


def _differences(row: HealthBenchRow, checks: list[tuple[str, Any, Any]]) -> list[RowError]:
    return [
        RowError(row.line, name, f"prompt_id {row.prompt_id!r} is already stored with a different {name}; not merged")
        for name, incoming, stored in checks
        if incoming != stored
    ]


def _catalogue(rows: list[HealthBenchRow], summary: ImportSummary) -> dict[str, ConsensusCriterion]:
    wanted: dict[str, tuple[HealthBenchRow, RubricItem]] = {}
    for row in rows:
        for item in row.rubrics:
            if item.cluster and item.cluster not in wanted:
                wanted[item.cluster] = (row, item)
    found = {c.cluster: c for c in ConsensusCriterion.objects.filter(cluster__in=list(wanted))}
    for cluster, entry in found.items():
        # An entry first seen in a meta-eval file has no axis or theme yet: this row has them.
        row, item = wanted[cluster]
        if not entry.axis or not entry.theme:
            entry.axis, entry.theme = entry.axis or item.axis, entry.theme or row.theme
            entry.save(update_fields=["axis", "theme"])
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


@functools.lru_cache(maxsize=1024)
def _tags_json(tags: tuple[str, ...]) -> str:
    # A file has only a few dozen distinct tag lists: encode each once.
    return db_json(list(tags))


def _criterion_row(conversation_id: int, position: int, item, catalogue: dict, now) -> tuple:
    consensus = catalogue[item.cluster].id if item.cluster else None
    return (
        conversation_id,
        position,
        item.criterion,
        item.points,
        _tags_json(item.tags),
        item.level,
        item.axis,
        consensus,
        None,
        False,
        now,
        now,
    )


def _store(rows: list[HealthBenchRow], subset_name: str | None) -> ImportSummary:
    summary = ImportSummary(rows=len(rows))
    catalogue = _catalogue(rows, summary)
    prompt_ids = [r.prompt_id for r in rows]
    existing: dict[str, Conversation] = {}
    for chunk in chunks(prompt_ids):
        for c in Conversation.objects.filter(prompt_id__in=chunk):
            existing[c.prompt_id] = c
    existing_ids = [c.id for c in existing.values()]
    stored_criteria: dict[int, list[tuple]] = {}
    ideals: dict[int, IdealResponse] = {}
    for id_chunk in chunks(existing_ids):
        query = Criterion.objects.filter(conversation_id__in=id_chunk).order_by("conversation_id", "position", "id")
        for cid, pk, position, text, points, tags in query.values_list(
            "conversation_id", "id", "position", "text", "points", "tags"
        ):
            stored_criteria.setdefault(cid, []).append((pk, position, (text, points, tuple(tags))))
        for ideal in IdealResponse.objects.filter(conversation_id__in=id_chunk, from_dataset=True):
            ideals[ideal.conversation_id] = ideal

    errors: list[RowError] = []
    new_rows: list[HealthBenchRow] = []
    merged_criteria: list[tuple[int, int, RubricItem]] = []  # (conversation id, position, item)
    moved: list[Criterion] = []
    refreshed: list[tuple[int, RubricItem]] = []
    filled: list[tuple[Conversation, HealthBenchRow]] = []
    for row in rows:
        conversation = existing.get(row.prompt_id)
        if conversation is None:
            new_rows.append(row)
            continue
        summary.conversations_merged += 1
        errors.extend(_conflicts(row, conversation, _existing_ideal(conversation.id, ideals)))
        stored = stored_criteria.get(conversation.id, [])
        if _is_bare(conversation, _existing_ideal(conversation.id, ideals)) and (
            row.example_tags or not conversation.messages
        ):
            filled.append((conversation, row))
        plan = plan_rubric_merge([merge_key(*key) for _, _, key in stored], [merge_key(*i.key()) for i in row.rubrics])
        for incoming, old in plan.matches:
            item = row.rubrics[incoming]
            if stored[old][2] != item.key():
                # The same consensus criterion, stored from a source that lacked some of it.
                refreshed.append((stored[old][0], item))
        if plan.conflict:
            summary.warnings.append(
                f"line {row.line}: prompt_id {row.prompt_id!r} had criteria this row lacks; kept them "
                f"after the row's criteria"
            )
        if not plan.changed:
            continue
        for position, (kind, index) in enumerate(plan.order):
            if kind == "new":
                merged_criteria.append((conversation.id, position, row.rubrics[index]))
            elif stored[index][1] != position:
                moved.append(Criterion(id=stored[index][0], position=position))
    if errors:
        raise ImportFailed(errors[:MAX_ERRORS])

    now = db_now()
    codes = iter(new_codes(len(new_rows) * 2 + len(filled)))
    new_ids = insert_rows(
        Conversation,
        Conversation.INSERT_COLUMNS,
        [
            (next(codes), r.prompt_id, db_json(r.messages), db_json(r.example_tags), r.theme, r.canary, None, now)
            for r in new_rows
        ],
    )
    criterion_rows = [_criterion_row(cid, pos, item, catalogue, now) for cid, pos, item in merged_criteria]
    for row, cid in zip(new_rows, new_ids, strict=True):
        criterion_rows.extend(_criterion_row(cid, i, item, catalogue, now) for i, item in enumerate(row.rubrics))
    insert_rows(Criterion, Criterion.INSERT_COLUMNS, criterion_rows)
    Criterion.objects.bulk_update(moved, ["position"], batch_size=1000)
    Criterion.objects.bulk_update(
        [
            Criterion(
                id=pk, text=item.criterion, points=item.points, tags=list(item.tags), axis=item.axis, level=item.level
            )
            for pk, item in refreshed
        ],
        ["text", "points", "tags", "axis", "level"],
        batch_size=1000,
    )
    for conversation, row in filled:
        conversation.example_tags, conversation.theme, conversation.canary = row.example_tags, row.theme, row.canary
        conversation.messages = row.messages
        conversation.save(update_fields=["example_tags", "theme", "canary", "messages"])
    ideal_rows = [(r, existing[r.prompt_id].id) for _, r in filled] + list(zip(new_rows, new_ids, strict=True))
    insert_rows(
        IdealResponse,
        IdealResponse.INSERT_COLUMNS,
        [
            (
                next(codes),
                cid,
                None,
                r.ideal.completion,
                _condition(r.ideal),
                r.ideal.group,
                db_json(list(r.ideal.ref_completions)),
                True,
                now,
            )
            for r, cid in ideal_rows
            if r.ideal is not None
        ],
    )
    summary.conversations_created = len(new_rows)
    summary.criteria_created = len(criterion_rows)
    summary.conversations_completed = len(filled)

    by_prompt = dict(zip((r.prompt_id for r in new_rows), new_ids, strict=True))
    conversation_ids = [existing[r.prompt_id].id if r.prompt_id in existing else by_prompt[r.prompt_id] for r in rows]
    for name in ["all"] + ([subset_name] if subset_name and subset_name != "all" else []):
        summary.memberships_created += _add_members(name, conversation_ids, now)
    return summary


def _condition(ideal: IdealData) -> str:
    if ideal.ref_completions:
        return IdealResponse.Condition.WITH_REFERENCE
    return IdealResponse.Condition.NO_REFERENCE


def _add_members(name: str, conversation_ids: list[int], now) -> int:
    subset, _ = Subset.objects.get_or_create(name=name, defaults={"kind": subset_kind(name)})
    present: set[int] = set()
    for chunk in chunks(conversation_ids):
        present.update(
            SubsetMember.objects.filter(subset=subset, conversation_id__in=chunk).values_list(
                "conversation_id", flat=True
            )
        )
    new = [(subset.id, cid, now) for cid in conversation_ids if cid not in present]
    insert_rows(SubsetMember, SubsetMember.INSERT_COLUMNS, new)
    return len(new)
