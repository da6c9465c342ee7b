"""Importing a simple-evals HealthBench results file as a Run: one transaction, bulk rows.

Each example becomes a Response (``sample_index`` = how many times its prompt_id came
before it in the file: the reference repeats examples for k samples) and each graded
rubric item a Grade. A grade's criterion is the conversation's Criterion with the same
(text, points, tags), the k-th such criterion for the k-th such item; a rubric item that
matches none (the rubric was edited since, or the run used another rubric) keeps its text,
points and tags with no criterion.
"""

import functools
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import cast

from django.db import IntegrityError, transaction
from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils import timezone

from annotation.formats.validation import FileRefused
from annotation.models import Conversation, Criterion
from grading.models import Grade, Response, Run
from grading.reports.results_file import LengthAdjustment, ResultExample
from healthbench_web.bulk import chunks, db_json, db_now, insert_rows, new_codes

MAX_NAME: int = Run._meta.get_field("name").max_length or 200


class RunImportFailed(FileRefused):
    errors: list[str]


@dataclass
class RunImportSummary:
    run: Run
    examples: int = 0
    grades: int = 0
    failed_grades: int = 0
    unmatched_criteria: int = 0
    max_samples: int = 0
    skipped: dict[str, list[int]] = field(default_factory=dict)  # prompt_id -> example indexes

    def __str__(self) -> str:
        return (
            f"run {self.run.name!r}: {self.examples} responses ({self.max_samples} sample(s) per prompt at most), "
            f"{self.grades} grades ({self.failed_grades} failed), "
            f"{self.unmatched_criteria} grade(s) matched no criterion of the stored rubric"
        )


def format_prompt_ids(unknown: dict[str, list[int]]) -> list[str]:
    """One line per prompt_id with the indexes of its examples in the file."""
    return [f"  {pid}  (example{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix))})" for pid, ix in unknown.items()]


def _check_name(name: str) -> None:
    if not name.strip():
        raise RunImportFailed(["--name must not be empty"])
    if len(name) > MAX_NAME:
        raise RunImportFailed([f"run name is longer than {MAX_NAME} characters"])
    if Run.objects.filter(name=name).exists():
        raise RunImportFailed([f"a run named {name!r} already exists; choose another --name"])


def _conversations(prompt_ids: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for chunk in chunks(prompt_ids):
        found.update(Conversation.objects.filter(prompt_id__in=chunk).values_list("prompt_id", "id"))
    return found


def _rubric_index(conversation_ids: list[int]) -> dict[int, dict[tuple, list[int]]]:
    """conversation id -> (text, points, tags) -> criterion ids in rubric order."""
    index: dict[int, dict[tuple, list[int]]] = defaultdict(lambda: defaultdict(list))
    tag_lists: dict[str, tuple[str, ...]] = {}
    for chunk in chunks(conversation_ids):
        rows = (
            Criterion.objects.filter(conversation_id__in=chunk)
            .order_by("conversation_id", "position", "id")
            # Tags as text: a dataset has a few dozen distinct tag lists, decoded once each.
            .values_list("conversation_id", "id", "text", "points", Cast("tags", TextField()))
        )
        for cid, pk, text, points, tags_text in rows:
            tags = tag_lists.get(tags_text)
            if tags is None:
                tags = tag_lists[tags_text] = tuple(json.loads(tags_text))
            index[cid][(text, points, tags)].append(pk)
    return index


@functools.lru_cache(maxsize=1024)
def _tags_json(tags: tuple[str, ...]) -> str:
    return db_json(list(tags))


def run_import(
    *,
    examples: list[ResultExample],
    name: str,
    source_file: str = "",
    skip_unknown: bool = False,
    length_adjustment: LengthAdjustment | None = None,
) -> RunImportSummary:
    """Store a parsed results file as a new Run named `name`, all or nothing.

    Conversations are found by prompt_id. Unknown prompt_ids fail the import, listed all
    together, unless `skip_unknown`, which leaves those examples out and reports them.
    `length_adjustment` (from the file, see results_file) makes the run report length-adjusted
    scores with those constants."""
    _check_name(name)
    conversation_of = _conversations(sorted({e.prompt_id for e in examples}))
    unknown: dict[str, list[int]] = defaultdict(list)
    for example in examples:
        if example.prompt_id not in conversation_of:
            unknown[example.prompt_id].append(example.index)
    if unknown and not skip_unknown:
        raise RunImportFailed(
            [
                f"{len(unknown)} prompt_id(s) are not in the database: import the dataset first "
                f"(manage.py import_healthbench FILE), or pass --skip-unknown to leave these examples out:",
                *format_prompt_ids(unknown),
            ]
        )
    kept = [e for e in examples if e.prompt_id in conversation_of]
    if not kept:
        raise RunImportFailed(["no example of the file belongs to a stored conversation: nothing to import"])
    try:
        with transaction.atomic():
            summary = _store(kept, name, source_file, conversation_of, length_adjustment)
    except IntegrityError:
        # Another import took the name between our check and our insert.
        raise RunImportFailed([f"a run named {name!r} already exists; choose another --name"]) from None
    summary.skipped = dict(unknown)
    return summary


def _kept_parameters(examples: list[ResultExample], conversation_of: dict[str, int]) -> list[str]:
    """Each response's ``parameters`` (JSON text): under ``imported``, what export_run writes
    back as it came (ResultExample.kept). A prompt equal to the stored conversation is not
    repeated."""
    ids = {conversation_of[e.prompt_id] for e in examples}
    # The messages column is JSON stored compressed (annotation.fields); the stubs see text.
    messages = cast("dict[int, list]", dict(Conversation.objects.filter(id__in=ids).values_list("id", "messages")))
    out = []
    for example in examples:
        kept = dict(example.kept or {})
        if "prompt" in kept and kept["prompt"] == messages.get(conversation_of[example.prompt_id]):
            del kept["prompt"]
        # As JSON text inside the JSON: PostgreSQL's jsonb would reorder the keys of every object.
        out.append(json.dumps({"imported": json.dumps(kept)}) if kept else "{}")
    return out


def _store(
    examples: list[ResultExample],
    name: str,
    source_file: str,
    conversation_of: dict[str, int],
    length_adjustment: LengthAdjustment | None,
) -> RunImportSummary:
    seen: Counter[str] = Counter()
    sample_index = []
    for example in examples:
        sample_index.append(seen[example.prompt_id])
        seen[example.prompt_id] += 1
    now = db_now()
    run = Run.objects.create(
        name=name,
        status=Run.Status.IMPORTED,
        # The file's items are the run's plan: its grade rows.
        plan=Run.Plan.STORED,
        total_items=sum(len(e.items) for e in examples),
        source_file=source_file[: Run._meta.get_field("source_file").max_length],
        samples=max(seen.values()),
        finished=timezone.now(),
        **(
            {}
            if length_adjustment is None
            else {
                "length_adjusted": True,
                "length_centre": length_adjustment.centre,
                "length_penalty": length_adjustment.penalty_per_500,
            }
        ),
    )
    summary = RunImportSummary(run=run, examples=len(examples), max_samples=max(seen.values()))
    response_rows = []
    parameters = _kept_parameters(examples, conversation_of)
    for e, k, code, kept in zip(examples, sample_index, new_codes(len(examples)), parameters, strict=True):
        response_rows.append(
            (
                code,
                conversation_of[e.prompt_id],
                e.completion,
                Response.Source.IMPORTED,
                "",
                kept,
                k,
                e.completion_id,
                None,
                e.input_tokens,
                e.output_tokens,
                now,
            )
        )
    response_ids = insert_rows(Response, Response.INSERT_COLUMNS, response_rows)
    rubrics = _rubric_index(sorted({conversation_of[e.prompt_id] for e in examples}))
    grade_rows = []
    for example, response_id in zip(examples, response_ids, strict=True):
        rubric = rubrics.get(conversation_of[example.prompt_id], {})
        used: Counter[tuple] = Counter()
        for position, item in enumerate(example.items):
            key = item.key()
            candidates = rubric.get(key, ())
            occurrence = used[key]
            used[key] += 1
            criterion_id = candidates[occurrence] if occurrence < len(candidates) else None
            if criterion_id is None:
                summary.unmatched_criteria += 1
            status = Grade.Status.GRADED if item.met is not None else Grade.Status.FAILED
            if item.met is None:
                summary.failed_grades += 1
            grade_rows.append(
                (
                    run.id,
                    response_id,
                    criterion_id,
                    position,
                    item.criterion,
                    item.points,
                    _tags_json(item.tags),
                    status,
                    item.met,
                    item.explanation,
                    "",
                    "",
                    0,
                    None,
                    None,
                    False,
                    now,
                )
            )
    insert_rows(Grade, Grade.INSERT_COLUMNS, grade_rows)
    summary.grades = len(grade_rows)
    return summary
