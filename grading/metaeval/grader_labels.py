"""Importing a grader's labels on meta-eval items into a Run: one transaction.

Rows are `{prompt_id, completion_id, category, criteria_met, explanation}`; each names a
(response, attached consensus criterion) item that a meta-eval import has stored. The run
gets one graded Grade per row, with the criterion's text, points and tags copied in as a
grading run would. A run is written once: importing the same labels into it again changes
nothing, other labels are refused.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.formats.healthbench import RowError
from annotation.formats.importer import ImportFailed
from annotation.formats.validation import LineTooLong
from annotation.models import Conversation, Criterion
from grading.metaeval.files import MAX_ERRORS, FileInvalid, GraderLabelRow, parse_grader_label_lines
from grading.models import Grade, Response, Run
from healthbench_web.bulk import chunks, db_json, db_now, insert_rows


class RunConflict(ValueError):
    """The run name is taken by a run holding other grades."""


@dataclass
class GraderLabelsSummary:
    run: Run
    rows: int
    grades_created: int

    def __str__(self) -> str:
        if not self.grades_created:
            return f"{self.rows} rows: run {self.run.name!r} already holds these labels; nothing changed"
        return f"{self.rows} rows: run {self.run.name!r} created with {self.grades_created} grades"


@dataclass(frozen=True)
class _Item:
    response_id: int
    criterion_id: int
    position: int
    text: str
    points: int
    tags: tuple[str, ...]


def _resolve(rows: list[GraderLabelRow]) -> list[_Item]:
    """The stored item of every row, or ImportFailed naming each row whose item is unknown."""
    prompt_ids = list(dict.fromkeys(r.prompt_id for r in rows))
    conversations: dict[str, int] = {}
    for chunk in chunks(prompt_ids):
        conversations.update(Conversation.objects.filter(prompt_id__in=chunk).values_list("prompt_id", "id"))
    responses: dict[tuple[int, str], int] = {}
    for chunk in chunks(list(dict.fromkeys(r.completion_id for r in rows))):
        stored = Response.objects.filter(completion_id__in=chunk).order_by("id")
        for cid, completion_id, pk in stored.values_list("conversation_id", "completion_id", "id"):
            # Should a completion_id repeat within a conversation, the oldest response is the
            # one the meta-eval import matched, so it is the one graded here too.
            responses.setdefault((cid, completion_id), pk)
    criteria: dict[tuple[int, str], list] = {}
    for id_chunk in chunks(list(conversations.values())):
        attached = Criterion.objects.filter(conversation_id__in=id_chunk, consensus_criterion__isnull=False)
        for cid, cluster, *rest in attached.values_list(
            "conversation_id", "consensus_criterion__cluster", "id", "position", "text", "points", "tags"
        ):
            criteria[(cid, cluster)] = rest
    items: list[_Item] = []
    errors: list[RowError] = []
    for r in rows:
        found = conversations.get(r.prompt_id)
        if found is None:
            errors.append(RowError(r.line, "prompt_id", f"no conversation has prompt_id {r.prompt_id!r}"))
        elif (found, r.completion_id) not in responses:
            errors.append(
                RowError(r.line, "completion_id", f"conversation {r.prompt_id!r} has no response {r.completion_id!r}")
            )
        elif (found, r.category) not in criteria:
            errors.append(RowError(r.line, "category", f"{r.category} is not attached to conversation {r.prompt_id!r}"))
        else:
            pk, position, text, points, tags = criteria[(found, r.category)]
            items.append(_Item(responses[(found, r.completion_id)], pk, position, text, points, tuple(tags)))
        if len(errors) >= MAX_ERRORS:
            errors.append(RowError(r.line, "", f"stopped after {MAX_ERRORS} errors"))
            break
    if errors:
        raise ImportFailed(errors)
    return items


def _grade_rows(run_id: int, rows: list[GraderLabelRow], items: list[_Item], now: Any) -> list[tuple]:
    # Grade.position is unique per (run, response): number each response's grades in rubric order.
    order = sorted(range(len(rows)), key=lambda i: (items[i].response_id, items[i].position, items[i].criterion_id))
    out: list[tuple] = []
    seen: dict[int, int] = {}
    for i in order:
        item, row = items[i], rows[i]
        position = seen[item.response_id] = seen.get(item.response_id, -1) + 1
        tags = db_json(list(item.tags))
        grade = (
            run_id,
            item.response_id,
            item.criterion_id,
            position,
            item.text,
            item.points,
            tags,
            Grade.Status.GRADED,
            row.met,
            row.explanation,
            "",
            "",
            0,
            None,
            None,
            False,
            now,
        )
        out.append(grade)
    return out


def _same_grades(run: Run, rows: list[GraderLabelRow], items: list[_Item]) -> bool:
    stored = {
        (response_id, criterion_id): (status, met, explanation)
        for response_id, criterion_id, status, met, explanation in run.grades.values_list(
            "response_id", "criterion_id", "status", "met", "explanation"
        )
    }
    incoming = {
        (item.response_id, item.criterion_id): (Grade.Status.GRADED, row.met, row.explanation)
        for row, item in zip(rows, items, strict=True)
    }
    return stored == incoming


def grader_labels_import(
    *, lines: Iterable[bytes | LineTooLong], run_name: str, source_file: str = ""
) -> GraderLabelsSummary:
    """Import grader labels into run `run_name` (status imported) in one transaction.

    Raises ImportFailed (errors naming line and field) for bad rows or unknown items, and
    RunConflict when `run_name` exists with other grades.
    """
    run_name = run_name.strip()
    if not run_name:
        raise ValueError("the run needs a name (--name)")
    try:
        rows = parse_grader_label_lines(lines)
    except FileInvalid as exc:
        raise ImportFailed(exc.errors) from None
    with transaction.atomic():
        items = _resolve(rows)
        # The lock makes a concurrent import of the same name wait, then see this one's grades.
        run = Run.objects.select_for_update().filter(name=run_name).first()
        if run is not None:
            if not _same_grades(run, rows, items):
                raise RunConflict(
                    f"run {run_name!r} already exists with other grades: import into a new --name instead"
                )
            return GraderLabelsSummary(run=run, rows=len(rows), grades_created=0)
        now = timezone.now()
        run = Run.objects.create(
            name=run_name,
            status=Run.Status.IMPORTED,
            plan=Run.Plan.STORED,  # the file's items
            total_items=len(rows),
            source_file=source_file[:500],
            started=now,
            finished=now,
        )
        insert_rows(Grade, Grade.INSERT_COLUMNS, _grade_rows(run.id, rows, items, db_now()))
    return GraderLabelsSummary(run=run, rows=len(rows), grades_created=len(rows))
