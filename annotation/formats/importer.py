"""Importing HealthBench eval files into the database: one transaction, merge by prompt_id."""

import functools
import gc
import itertools
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from annotation.formats.healthbench import HealthBenchRow, IdealData, RowError, RowInvalid, RubricItem
from annotation.formats.professional import parse_any_line
from annotation.formats.rubric_merge import merge_key, plan_rubric_merge
from annotation.formats.validation import NO_ROWS, FileRefused, LineTooLong, numbered_lines
from annotation.models import ConsensusCriterion, Conversation, Criterion, IdealResponse, Subset, SubsetMember
from annotation.rubric_versions import rubric_changed
from healthbench_web.bulk import chunks, db_json, db_now, insert_rows, new_codes

MAX_ERRORS = 50
# Rows parsed and stored at a time: memory holds one chunk (about 6 MB of the main file).
CHUNK_ROWS = 500
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
    professional_rows: int = 0
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        professional = (
            f" ({self.professional_rows} recognised as HealthBench Professional rows and stored with their "
            f"use_case, type, difficulty, specialty and physician_response; reports score them by use_case:, "
            f"type:, difficulty: and specialty: tags)"
            if self.professional_rows
            else ""
        )
        return (
            f"{self.rows} rows{professional}: {self.conversations_created} new conversations, "
            f"{self.conversations_merged} already known ({self.conversations_completed} completed with "
            f"their dataset fields), "
            f"{self.criteria_created} criteria added, "
            f"{self.consensus_criteria_created} consensus criteria added to the catalogue, "
            f"{self.memberships_created} subset memberships added"
        )


def subset_kind(name: str) -> str:
    return name if name in (Subset.Kind.ALL, Subset.Kind.CONSENSUS, Subset.Kind.HARD) else Subset.Kind.CUSTOM


def is_consensus_file(rows: list[HealthBenchRow]) -> bool:
    """A Consensus file, whatever its name: every row's rubric holds only ``level:cluster``
    criteria (the main file's rows cut down to them). A Hard row is a main row unchanged, so
    only its name tells a Hard file."""
    return bool(rows) and all(r.rubrics and all("level:cluster" in item.tags for item in r.rubrics) for r in rows)


def imported_subset_kind(name: str, consensus: bool, summary: ImportSummary) -> str:
    """The kind of a subset a file creates, from its content where the content tells, and
    what was decided, in the summary's warnings: a Consensus subset grades only the cluster
    criteria of its conversations, so naming it wrongly would grade the whole rubric."""
    if consensus and name != Subset.Kind.CONSENSUS:
        summary.warnings.append(
            f"imported as a Consensus subset: every row of the file holds only level:cluster criteria, so "
            f"runs on {name!r} grade those criteria only"
        )
        return Subset.Kind.CONSENSUS
    if not consensus and name == Subset.Kind.CONSENSUS:
        summary.warnings.append(
            "the file is not a Consensus file (some rows hold criteria other than level:cluster ones), yet it "
            "was imported into the subset 'consensus': runs on it grade only the cluster criteria"
        )
    return subset_kind(name)


def check_subset_name(name: str) -> None:
    if not SUBSET_NAME.match(name):
        raise ValueError(
            f"subset name {name!r} is not valid: use lowercase letters, digits, '-' and '_', starting "
            f"with a letter or digit"
        )


class _FileState:
    """What an import keeps from one chunk of rows to the next: a few values per row, never the rows."""

    def __init__(self, subset_name: str | None):
        self.subset_name = subset_name
        self.summary = ImportSummary()
        self.errors: list[RowError] = []
        self.first_line: dict[str, int] = {}  # prompt_id -> the line it first appears on
        self.conversation_ids: list[int] = []  # in file order, for the subset memberships
        self.created_ids: set[int] = set()  # conversations this import created: members of no subset yet
        self.consensus = True  # every row so far holds only level:cluster criteria
        self.lines = 0

    @property
    def full(self) -> bool:
        return len(self.errors) >= MAX_ERRORS


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause Python's cycle collector while a chunk is parsed and stored.

    A chunk makes ~30,000 containers (decoded rows, then the rows to store) and keeps them
    until it is stored, so the collector would walk each several times, and the whole heap
    now and then: a third of the parse's CPU (README, Benchmarks, issue 32). Decoded JSON and
    the rows built from it hold no reference cycles; what cycles a chunk's queries leave are
    collected when the collector runs again, after the chunk. It is switched on again only by
    whoever found it on, so nested or concurrent imports never leave it off.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _take_chunk(state: _FileState, block: list[tuple[int, bytes | LineTooLong]]) -> None:
    """Parse a chunk of lines and, while the file has no bad line yet, store its rows."""
    rows = _parse_chunk(state, block)
    state.consensus = state.consensus and is_consensus_file(rows)
    state.summary.rows += len(rows)
    state.summary.professional_rows += sum(row.professional is not None for row in rows)
    if not state.errors:
        _store_chunk(rows, state)


def _parse_chunk(state: _FileState, numbered: Iterable[tuple[int, bytes | LineTooLong]]) -> list[HealthBenchRow]:
    rows: list[HealthBenchRow] = []
    for number, raw in numbered:
        state.lines = number
        try:
            row = parse_any_line(number, raw)
        except RowInvalid as exc:
            state.errors.append(exc.error)
        else:
            first = state.first_line.setdefault(row.prompt_id, number)
            if first != number:
                state.errors.append(RowError(number, "prompt_id", f"{row.prompt_id!r} already appears on line {first}"))
            else:
                rows.append(row)
        if state.full:
            state.errors.append(RowError(number, "", f"stopped after {MAX_ERRORS} errors"))
            break
    return rows


def import_healthbench_lines(lines: Iterable[bytes | LineTooLong], *, subset_name: str | None = None) -> ImportSummary:
    """Import a HealthBench eval file (main, Hard or Consensus) in one transaction.

    Every conversation joins the subset `all`, and `subset_name` when given. A prompt_id that
    is already stored is merged: its criteria are matched, never doubled or dropped.

    The file is read CHUNK_ROWS rows at a time and each chunk is stored before the next is
    parsed, so memory holds one chunk, not the file. The transaction keeps the import whole:
    after the first bad line nothing more is stored, the rest is still checked (up to
    MAX_ERRORS), and ImportFailed rolls back what the earlier chunks wrote.
    """
    if subset_name is not None:
        check_subset_name(subset_name)
    state = _FileState(subset_name)
    numbered = numbered_lines(lines)
    with transaction.atomic():
        while block := list(itertools.islice(numbered, CHUNK_ROWS)):
            with _no_cycle_collection():
                _take_chunk(state, block)
            if state.full:
                break
        if not state.lines:
            state.errors.append(RowError(0, "", NO_ROWS))
        if state.errors:
            raise ImportFailed(state.errors)
        _finish(state)
    return state.summary


def _existing_ideal(conversation_id: int, ideals: dict[int, IdealResponse]) -> IdealData | None:
    ideal = ideals.get(conversation_id)
    if ideal is None:
        return None
    return IdealData(ideal.text, ideal.group, tuple(ideal.reference_responses))


def _is_bare(conversation: Conversation, ideal: IdealData | None) -> bool:
    """Created from a source without dataset fields (a meta-eval file): the row may fill them in."""
    return conversation.example_tags == [] and ideal is None and conversation.professional is None


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
        ("professional fields", row.professional, conversation.professional),
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
    summary.consensus_criteria_created += len(new)
    if new:
        found = {c.cluster: c for c in ConsensusCriterion.objects.filter(cluster__in=list(wanted))}
    return found


@functools.lru_cache(maxsize=1024)
def _tag_columns(tags: tuple[str, ...]) -> tuple[str, str, str, str | None]:
    """(tags as JSON, level, axis, cluster) of a criterion with these tags. A file has only a
    few dozen distinct tag lists: each is encoded and read once."""
    item = RubricItem("", 0, tags)
    # A Professional criterion has no tags: a conversation's own (example-level) criterion.
    return db_json(list(tags)), item.level or Criterion.Level.EXAMPLE, item.axis, item.cluster


def _criterion_row(conversation_id: int, position: int, item: RubricItem, catalogue: dict, now) -> tuple:
    tags, level, axis, cluster = _tag_columns(item.tags)
    consensus = catalogue[cluster].id if cluster else None
    return (conversation_id, position, item.criterion, item.points, tags, level, axis, consensus, None, False, now, now)


def _stored(rows: list[HealthBenchRow]) -> tuple[dict[str, Conversation], dict[int, list[tuple]], dict]:
    """What is stored already for these rows: conversations by prompt_id, their criteria
    ((id, position, key) in rubric order) and dataset ideal responses by conversation id."""
    existing: dict[str, Conversation] = {}
    for chunk in chunks([r.prompt_id for r in rows]):
        for c in Conversation.objects.filter(prompt_id__in=chunk):
            existing[c.prompt_id] = c
    stored_criteria: dict[int, list[tuple]] = {}
    ideals: dict[int, IdealResponse] = {}
    for id_chunk in chunks([c.id for c in existing.values()]):
        query = Criterion.objects.filter(conversation_id__in=id_chunk).order_by("conversation_id", "position", "id")
        for cid, pk, position, text, points, tags in query.values_list(
            "conversation_id", "id", "position", "text", "points", "tags"
        ):
            stored_criteria.setdefault(cid, []).append((pk, position, (text, points, tuple(tags))))
        for ideal in IdealResponse.objects.filter(conversation_id__in=id_chunk, from_dataset=True):
            ideals[ideal.conversation_id] = ideal
    return existing, stored_criteria, ideals


def _insert_conversations(new_rows: list[HealthBenchRow], codes: Iterator[str], now) -> list[int]:
    return insert_rows(
        Conversation,
        (*Conversation.INSERT_COLUMNS, "professional"),
        [
            (
                next(codes),
                r.prompt_id,
                db_json(r.messages),
                db_json(r.example_tags),
                r.theme,
                r.canary,
                None,
                now,
                None if r.professional is None else db_json(r.professional),
            )
            for r in new_rows
        ],
    )


def _insert_ideals(ideal_rows: list[tuple[HealthBenchRow, int]], codes: Iterator[str], now) -> None:
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
        ids=False,
    )


def _store_chunk(rows: list[HealthBenchRow], state: _FileState) -> None:
    """Store one chunk of parsed rows; a conflict with what is stored goes to `state.errors`."""
    summary = state.summary
    catalogue = _catalogue(rows, summary)
    existing, stored_criteria, ideals = _stored(rows)
    errors: list[RowError] = []
    new_rows: list[HealthBenchRow] = []
    merged_criteria: list[tuple[int, int, RubricItem]] = []  # (conversation id, position, item)
    moved: list[Criterion] = []
    refreshed: list[tuple[int, RubricItem]] = []
    stored_of = {pk: cid for cid, items in stored_criteria.items() for pk, _, _ in items}  # criterion -> conversation
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
        state.errors.extend(errors[: MAX_ERRORS - len(state.errors)])
        return

    now = db_now()
    codes = iter(new_codes(len(new_rows) * 2 + len(filled)))
    new_ids = _insert_conversations(new_rows, codes, now)
    criterion_rows = [_criterion_row(cid, pos, item, catalogue, now) for cid, pos, item in merged_criteria]
    for row, cid in zip(new_rows, new_ids, strict=True):
        criterion_rows.extend(_criterion_row(cid, i, item, catalogue, now) for i, item in enumerate(row.rubrics))
    insert_rows(Criterion, Criterion.INSERT_COLUMNS, criterion_rows, ids=False)
    # New conversations start at version 0; merged ones gained or refreshed criteria.
    rubric_changed([cid for cid, _, _ in merged_criteria] + [stored_of[pk] for pk, _ in refreshed])
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
        conversation.messages, conversation.professional = row.messages, row.professional
        conversation.save(update_fields=["example_tags", "theme", "canary", "messages", "professional"])
    ideal_rows = [(r, existing[r.prompt_id].id) for _, r in filled] + list(zip(new_rows, new_ids, strict=True))
    _insert_ideals(ideal_rows, codes, now)
    summary.conversations_created += len(new_rows)
    summary.criteria_created += len(criterion_rows)
    summary.conversations_completed += len(filled)
    _join_all(rows, state, existing, dict(zip((r.prompt_id for r in new_rows), new_ids, strict=True)), now)


def _join_all(rows: list[HealthBenchRow], state: _FileState, existing: dict, created: dict[str, int], now) -> None:
    """Every row's conversation joins the subset `all`; kept in file order for the named subset."""
    conversation_ids = [existing[r.prompt_id].id if r.prompt_id in existing else created[r.prompt_id] for r in rows]
    state.created_ids.update(created.values())
    state.summary.memberships_created += _add_members(
        "all", Subset.Kind.ALL, conversation_ids, now, state.summary, state.created_ids
    )
    state.conversation_ids.extend(conversation_ids)


def _finish(state: _FileState) -> None:
    """What needs the whole file: the named subset's kind (a Consensus file only shows at its end)."""
    name, summary = state.subset_name, state.summary
    if name and name != "all":
        kind = imported_subset_kind(name, state.consensus, summary)
        summary.memberships_created += _add_members(
            name, kind, state.conversation_ids, db_now(), summary, state.created_ids
        )


def _condition(ideal: IdealData) -> str:
    if ideal.ref_completions:
        return IdealResponse.Condition.WITH_REFERENCE
    return IdealResponse.Condition.NO_REFERENCE


def _add_members(
    name: str, kind: str, conversation_ids: list[int], now, summary: ImportSummary, created_ids: set[int]
) -> int:
    """Add the conversations to the subset `name`; `created_ids` were created by this import,
    so only the others are looked up among the members already there."""
    subset, created = Subset.objects.get_or_create(name=name, defaults={"kind": kind})
    if not created and subset.kind != kind and kind == Subset.Kind.CONSENSUS:
        # Made another kind before (by a curator, or an earlier import): said, and left as it is.
        summary.warnings.append(
            f"the subset {name!r} already exists as a {subset.kind} subset and keeps that kind: runs on it "
            "grade its conversations' whole rubrics"
        )
    present: set[int] = set()
    known = [] if created else [cid for cid in conversation_ids if cid not in created_ids]
    for chunk in chunks(known):
        present.update(
            SubsetMember.objects.filter(subset=subset, conversation_id__in=chunk).values_list(
                "conversation_id", flat=True
            )
        )
    new = [(subset.id, cid, now) for cid in conversation_ids if cid not in present]
    insert_rows(SubsetMember, SubsetMember.INSERT_COLUMNS, new, ids=False)
    return len(new)
