"""A batched run's work at the provider: its requests sent through OpenAI's Batch API
(``/v1/files`` and ``/v1/batches``, for Chat Completions and Responses alike), polled, and
their answers stored as grades. "Provider batch" (grading.models.ProviderBatch) names the
provider's batch; the RunBatch is still the work unit a task claims.

Each claim of a batched RunBatch (grading.pipeline.batches) calls :func:`provider_batches_work`,
which takes one step and returns; the task then hands the RunBatch back and queues itself
again after GRADING_BATCH_POLL_SECONDS, until every request has its grade. A step:

1. Requests with no grade and in no open provider batch (the first time: all of them) are
   cut into files within the provider's limits (GRADING_BATCH_MAX_REQUESTS lines,
   GRADING_BATCH_MAX_BYTES bytes) and stored as new provider batches, in one transaction
   with the lease's renewal.
2. A provider batch not sent yet is uploaded (``files.create(purpose="batch")``) and created
   (``batches.create(completion_window="24h")``), each provider id stored as soon as it is
   known. Before a create that may have been sent already (a worker died after sending it),
   the provider's list of batches is searched for this row's code in their metadata, so a
   crash never creates a second batch.
3. A sent one is polled (``batches.retrieve``): its status and request counts are stored
   for the run's progress.
4. An ended one (completed, failed, expired, cancelled) has its output and error files read
   (``files.content``) and each line mapped back by ``custom_id`` (the request's key) to the
   items that ask it. Answers go through the live grader's rules
   (grading.pipeline.provider_batch_lines.judge): a refusal or an unreadable answer fails
   the grade with the same words, an answer cut off is asked again with twice the limit in
   the next round's provider batch. Failed lines, and requests a failed, expired or
   cancelled batch never ran, become failed grades, never "not met"; the researcher retries
   them, in a new provider batch or live (grading.pipeline.runs.run_resume). The grades,
   the next round and the mark "collected" are written in one transaction with the
   lease's renewal, so a worker killed at any point loses nothing and stores nothing twice.

Cancelling or failing the run cancels its open provider batches (:func:`provider_batches_cancel`,
a task queued when the run's transaction commits, and the sweep catches any it missed).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal

import openai
from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from grading.endpoint_access import AZURE
from grading.models import Grade, ProviderBatch, Run, RunBatch
from grading.pipeline.call_failures import status_failure, transport_failure
from grading.pipeline.client import GradeOutcome
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.endpoint_clients import batch_client
from grading.pipeline.failure_log import failures_note
from grading.pipeline.grader_prompt import MalformedAnswer, parse_answer
from grading.pipeline.provider_batch_lines import (
    AskAgain,
    Carry,
    Line,
    judge,
    malformed_line,
    read_lines,
    request_line,
    split_files,
)
from grading.pipeline.provider_errors import UNGRADABLE, Action, read_error
from grading.pipeline.replies import EmptyAnswer, NotACompletion, parse_reply
from grading.pipeline.request_shape import chunk_request, criterion_request
from grading.pipeline.response_prompt import read_chunk_answer, split_usage
from healthbench_web.redact import endpoint_keys, redact
from healthbench_web.storable import REASON_CHARS, storable

log = logging.getLogger(__name__)
COMPLETION_WINDOW: Literal["24h"] = "24h"
METADATA_KEY = "healthbench_batch"
LIST_PAGES = 10  # batches.list pages searched for a create that may have been sent (100 each)
Status = ProviderBatch.Status
FALLBACK = "#"


class BatchFatal(Exception):
    """The provider refuses the Batch API calls in a way no retry helps (a key, a model, a
    quota): the run fails with these words."""


@dataclass(frozen=True)
class Request:
    """One request of a RunBatch, as the live call would send it: a criterion's prompt, or,
    per response, a chunk's prompt with the per-criterion prompt of each of its criteria
    (`fallbacks`, for entries the answer leaves unusable). `rows` makes the grades of some
    of its criteria, by index from 0, from their outcomes."""

    prompt: str
    rows: Callable[[dict[int, GradeOutcome]], list[Grade]]
    fallbacks: list[str] | None = None

    @property
    def size(self) -> int:
        return 1 if self.fallbacks is None else len(self.fallbacks)


def _line_of(custom_id: str) -> tuple[str, int | None]:
    """(request key, criterion index) of a line: ``KEY`` asks the request, ``KEY#i`` the
    per-criterion fallback of its criterion i."""
    key, _, index = custom_id.partition(FALLBACK)
    return key, int(index) if index else None


def batch_endpoint(target: CallTarget) -> str:
    """The `endpoint` a batch of this target names (/v1/chat/completions or /v1/responses)."""
    # Azure OpenAI names a batch's endpoint without the version prefix.
    path = "/v1/responses" if target.api_style == "responses" else "/v1/chat/completions"
    return path.removeprefix("/v1") if target.provider == AZURE else path


def _line(target: CallTarget, custom_id: str, requests: dict[str, Request], carry: Carry) -> bytes | None:
    """The line exactly as the live call sends it (grading.pipeline.request_shape); None when
    the request has its grades already."""
    key, index = _line_of(custom_id)
    request = requests.get(key)
    if request is None:
        return None
    limit = carry.limit or None
    if request.fallbacks is None:
        path, body = criterion_request(target, request.prompt, max_tokens=limit)
    elif index is None:
        path, body = chunk_request(target, request.prompt, max_tokens=limit)
    else:
        path, body = criterion_request(target, request.fallbacks[index], max_tokens=limit)
    return request_line(custom_id, path if target.provider == AZURE else "/v1" + path, body)


def _control(target: CallTarget, call: Callable[[], Any]) -> Any:
    """One Batch API call; a fault no retry helps raises BatchFatal with the provider's words."""
    try:
        return call()
    except openai.APIStatusError as exc:
        failure = status_failure(exc, target)
        if failure.action is Action.FATAL:
            raise BatchFatal(failure.error) from None
        raise
    except openai.APIConnectionError as exc:
        failure = transport_failure(exc, target)
        if failure.action is Action.FATAL:
            raise BatchFatal(failure.error) from None
        raise


def provider_batches_work(
    *, claim: Any, run: Run, target: CallTarget, requests: dict[str, Request], format_attempts: int
) -> str:
    """One step of a batched RunBatch: "done" (every request has its grade), "waiting" (poll
    again later) or "stopped" (the claim was lost). `requests` are the RunBatch's requests
    that still have no grade, by key. Raises BatchFatal."""
    with batch_client(target) as client:
        return _work(client, claim=claim, run=run, target=target, requests=requests, format_attempts=format_attempts)


def _work(
    client: openai.OpenAI,
    *,
    claim: Any,
    run: Run,
    target: CallTarget,
    requests: dict[str, Request],
    format_attempts: int,
) -> str:
    batch: RunBatch = claim.batch
    rows = list(ProviderBatch.objects.filter(run_batch=batch, collected=False))
    covered = {_line_of(custom_id)[0] for row in rows for custom_id in row.requests}
    new = [key for key in requests if key not in covered]
    if new:
        created = _provider_batches_new(claim, run, target, new, requests)
        if created is None:
            return "stopped"
        rows += created
    while rows:
        row = rows.pop(0)
        if row.status == Status.NEW:
            _submit(client, target, run, row, requests)
        if row.batch_id and (row.status not in ProviderBatch.ENDED or row.polled is None):
            _poll(client, target, row)  # also a batch found after a lost create: its files
        if row.status in ProviderBatch.ENDED:
            kept, follow_up = _collect(claim, client, target, run, row, requests, format_attempts)
            if not kept:
                return "stopped"
            if follow_up is not None:
                rows.append(follow_up)
        if not claim.renew():
            return "stopped"
    return "waiting" if ProviderBatch.objects.filter(run_batch=batch, collected=False).exists() else "done"


def _provider_batches_new(
    claim: Any, run: Run, target: CallTarget, keys: list[str], requests: dict[str, Request]
) -> list[ProviderBatch] | None:
    lines = [line for key in keys if (line := _line(target, key, requests, Carry())) is not None]
    files = split_files(
        lines, max_requests=settings.GRADING_BATCH_MAX_REQUESTS, max_bytes=settings.GRADING_BATCH_MAX_BYTES
    )
    with transaction.atomic():
        last = ProviderBatch.objects.filter(run_batch=claim.batch).aggregate(n=Max("round"))["n"]
        number = 0 if last is None else last + 1
        rows = [
            ProviderBatch(run=run, run_batch=claim.batch, round=number, part=part, requests={keys[i]: {} for i in ids})
            for part, ids in enumerate(files)
        ]
        ProviderBatch.objects.bulk_create(rows)
        if not claim.renew():
            transaction.set_rollback(True)
            return None
    log.info("run %r: %d request(s) in %d provider batch(es)", run.name, len(keys), len(rows), extra={"run": run.name})
    return list(ProviderBatch.objects.filter(run_batch=claim.batch, round=number).order_by("part"))


def _submit(client: openai.OpenAI, target: CallTarget, run: Run, row: ProviderBatch, requests: dict) -> None:
    if not row.input_file_id:
        data = b"".join(
            line
            for custom_id, carry in row.requests.items()
            if (line := _line(target, custom_id, requests, Carry.of(carry))) is not None
        )
        uploaded = _control(
            target,
            lambda: client.files.create(
                file=(f"healthbench-{row.code}.jsonl", data, "application/jsonl"), purpose="batch"
            ),
        )
        row.input_file_id = uploaded.id
        ProviderBatch.objects.filter(id=row.id).update(input_file_id=row.input_file_id)
    if not row.batch_id and row.create_sent is not None:
        row.batch_id = _find_created(client, target, row)
    if not row.batch_id:
        row.create_sent = timezone.now()
        ProviderBatch.objects.filter(id=row.id).update(create_sent=row.create_sent)
        created = _control(
            target,
            lambda: client.batches.create(
                input_file_id=row.input_file_id,
                endpoint=batch_endpoint(target),  # type: ignore[arg-type]
                completion_window=COMPLETION_WINDOW,
                metadata={METADATA_KEY: str(row.code), "run": run.name[:500]},
            ),
        )
        row.batch_id = created.id
        row.status = created.status
        ProviderBatch.objects.filter(id=row.id).update(batch_id=row.batch_id, status=row.status)
        log.info("run %r: provider batch %s created", run.name, row.batch_id, extra={"run": run.name})


def _find_created(client: openai.OpenAI, target: CallTarget, row: ProviderBatch) -> str:
    """The provider's batch made for this row by a create whose answer was lost, or ""."""
    after: str | None = None
    for _ in range(LIST_PAGES):
        page = _control(target, partial(client.batches.list, limit=100, after=after or openai.omit))
        for found in page.data:
            if (found.metadata or {}).get(METADATA_KEY) == str(row.code):
                ProviderBatch.objects.filter(id=row.id).update(batch_id=found.id, status=found.status)
                row.status, row.polled = found.status, None  # polled next, for its files
                return found.id
            after = found.id
        if not page.has_more or after is None:
            break
    return ""


def _poll(client: openai.OpenAI, target: CallTarget, row: ProviderBatch) -> None:
    found = _control(target, lambda: client.batches.retrieve(row.batch_id))
    counts = found.request_counts
    errors = [e.message or e.code or "" for e in ((found.errors.data or []) if found.errors else [])]
    row.status = found.status
    row.total, row.completed, row.failed = (counts.total, counts.completed, counts.failed) if counts else (0, 0, 0)
    row.output_file_id = found.output_file_id or ""
    row.error_file_id = found.error_file_id or ""
    row.error = storable(
        redact(storable("; ".join(e for e in errors if e), REASON_CHARS), endpoint_keys()), REASON_CHARS
    )
    row.polled = timezone.now()
    row.save(
        update_fields=["status", "total", "completed", "failed", "output_file_id", "error_file_id", "error", "polled"]
    )


def _content(client: openai.OpenAI, target: CallTarget, file_id: str) -> bytes:
    return _control(target, lambda: client.files.content(file_id).content) if file_id else b""


def _no_answer(row: ProviderBatch, line: Line | None) -> str:
    if line is not None and line.malformed:
        return f"the provider batch's line for this request is malformed: {line.malformed}"
    if line is not None and line.error_code == "batch_expired":
        return "the provider batch expired before this request ran (batch_expired)"
    if line is not None:
        return f"the provider batch did not run this request: {line.error_code or 'error'}: {line.error_message}"
    if row.status == Status.FAILED:
        return f"the provider batch failed{': ' + row.error if row.error else ''}"
    return f"no answer in the provider batch's files (it ended {row.status})"


def _outcomes_of_line(
    target: CallTarget,
    row: ProviderBatch,
    request: Request,
    index: int | None,
    line: Line | None,
    carry: Carry,
    format_attempts: int,
) -> tuple[dict[int, GradeOutcome], dict[int | None, Carry]]:
    """The outcomes a line settles (by criterion index), and what it leaves to ask again:
    the same request (None) with more room, or per-criterion fallbacks of a chunk (by index)."""
    chunk = request.fallbacks is not None and index is None
    indexes = list(range(request.size)) if chunk else [index or 0]
    fallback = index is not None

    def failed(carry: Carry, error: str, raw: str = "") -> tuple[dict, dict]:
        shares = _shares(carry, len(indexes))
        return {
            i: _spent(c, met=None, error=error, raw_output=raw, fallback=fallback)
            for i, c in zip(indexes, shares, strict=True)
        }, {}

    if line is None or line.status_code is None:
        return failed(carry, _no_answer(row, line))
    if not line.answered:
        problem = read_error(line.status_code, line.body, text=json.dumps(line.body)[:2000])
        said = redact(problem.describe(target.name or target.model), endpoint_keys())
        return failed(carry, UNGRADABLE + said if problem.conversation_bound else said)
    try:
        reply = parse_reply(json.dumps(line.body).encode(), api_style=target.api_style, attempts=1)
    except NotACompletion as exc:
        return failed(carry, f"the endpoint's answer is not a completion: {exc}")
    except EmptyAnswer as exc:
        return failed(carry, f"the endpoint's answer is empty: {exc}")
    n = request.size
    step = judge(
        carry,
        reply,
        base_limit=target.max_tokens,
        format_attempts=format_attempts,
        parse=(lambda text: read_chunk_answer(text, n))
        if chunk
        else (lambda text: parse_answer(text, lenient=target.lenient_answers)),
        malformed=MalformedAnswer,
    )
    if isinstance(step, AskAgain):
        return {}, {index: step.carry}
    if step.verdict is None:
        return failed(step.carry, step.error, step.raw_output)
    if not chunk:
        verdict = step.verdict
        return {
            indexes[0]: _spent(
                step.carry,
                met=verdict.met,
                explanation=verdict.explanation,
                raw_output=step.raw_output,
                fallback=fallback,
            )
        }, {}
    # A chunk's answer: its tokens shared among its criteria (its requests on the first, as
    # live); an entry missing or unusable leaves its criterion to a per-criterion line of its own.
    shares = _shares(step.carry, n)
    entries = step.verdict.entries or {}
    settled: dict[int, GradeOutcome] = {}
    again: dict[int | None, Carry] = {}
    for i in range(n):
        answer = step.verdict.verdicts.get(i + 1)
        if answer is None:
            again[i] = replace(shares[i], limit=0, answers=0, problem="")
        else:
            settled[i] = _spent(
                shares[i],
                met=answer.met,
                explanation=answer.explanation,
                raw_output=entries.get(i + 1, step.raw_output),
            )
    return settled, again


def _spent(carry: Carry, **fields: Any) -> GradeOutcome:
    return GradeOutcome(
        attempts=carry.attempts,
        prompt_tokens=carry.prompt_tokens,
        completion_tokens=carry.completion_tokens,
        cached_tokens=carry.cached_tokens,
        reasoning_tokens=carry.reasoning_tokens,
        cache_write_tokens=carry.cache_write_tokens,
        **fields,
    )


def _shares(carry: Carry, n: int) -> list[Carry]:
    """A call's usage split among `n` grades, summing to it; its requests on the first."""
    names = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens", "cache_write_tokens")
    splits = {name: split_usage(getattr(carry, name), n) for name in names}
    shares: list[dict[str, Any]] = [{name: splits[name][k] for name in names} for k in range(n)]
    return [replace(carry, attempts=carry.attempts if k == 0 else 0, **shares[k]) for k in range(n)]


def _collect(
    claim: Any,
    client: openai.OpenAI,
    target: CallTarget,
    run: Run,
    row: ProviderBatch,
    requests: dict[str, Request],
    format_attempts: int,
) -> tuple[bool, ProviderBatch | None]:
    """Store an ended provider batch's lines; returns (stored, the next round's provider
    batch or None); not stored when the claim was lost."""
    lines: dict[str, Line] = {}
    for file_id in (row.error_file_id, row.output_file_id):  # an answer wins over an error
        found, problems = read_lines(_content(client, target, file_id))
        lines |= found
        for problem in problems:
            log.warning("run %r provider batch %s: %s", run.name, row.batch_id, problem, extra={"run": run.name})
    grades: list[Grade] = []
    again: dict[str, dict] = {}
    errors: list[str] = []
    for custom_id, carried in row.requests.items():
        key, index = _line_of(custom_id)
        request = requests.get(key)
        if request is None:
            continue  # graded meanwhile (a resume, another claim's write)
        line = lines.get(custom_id)
        try:
            settled, asked = _outcomes_of_line(target, row, request, index, line, Carry.of(carried), format_attempts)
        except Exception as exc:  # a line no rule foresaw fails its item, never the task
            log.warning("run %r provider batch %s: line %s", run.name, row.batch_id, custom_id, exc_info=True)
            what = f"{type(exc).__name__}: {exc}"
            bad = replace(line, malformed=what) if line is not None else malformed_line(custom_id, what)
            settled, asked = _outcomes_of_line(target, row, request, index, bad, Carry.of(carried), format_attempts)
        for which, carry in asked.items():
            again[custom_id if which is None else f"{key}{FALLBACK}{which}"] = carry.as_json() or {"answers": 0}
        errors += [outcome.error for outcome in settled.values() if outcome.met is None]
        for grade in request.rows(settled) if settled else []:
            grade.batched = True
            grades.append(grade)
    failures_note(run, "grader", errors)
    with transaction.atomic():
        follow_up = None
        if again:
            parts = ProviderBatch.objects.filter(run_batch=row.run_batch_id, round=row.round + 1)
            last = parts.aggregate(n=Max("part"))["n"]
            follow_up = ProviderBatch.objects.create(
                run=run,
                run_batch_id=row.run_batch_id,
                round=row.round + 1,
                part=0 if last is None else last + 1,
                requests=again,
            )
        Grade.objects.bulk_create(grades, ignore_conflicts=True)
        ProviderBatch.objects.filter(id=row.id).update(collected=True)
        if not claim.renew():
            transaction.set_rollback(True)
            return False, None
    log.info(
        "run %r: provider batch %s %s: %d grade(s) stored, %d asked again",
        run.name,
        row.batch_id,
        row.status,
        len(grades),
        len(again),
        extra={"run": run.name},
    )
    return True, follow_up


# --- cancelling -------------------------------------------------------------------------------


def provider_batches_cancel(*, run_id: int) -> int:
    """Cancel the provider batches of a run that no longer runs; returns how many were asked."""
    run = Run.objects.select_related("grader_config").get(id=run_id)
    if run.status == Run.Status.RUNNING or run.grader_config is None:
        return 0
    rows = ProviderBatch.objects.filter(run=run, collected=False, cancel_sent__isnull=True).exclude(
        status__in=ProviderBatch.ENDED
    )
    if not rows.exists():
        return 0
    target = CallTarget.of(run.grader_config)
    with batch_client(target) as client:
        asked = _cancel(client, target, rows)
    log.info("run %r: %d provider batch(es) cancelled", run.name, asked, extra={"run": run.name})
    return asked


def _cancel(client: openai.OpenAI, target: CallTarget, rows: Any) -> int:
    asked = 0
    for row in rows:
        if not row.batch_id and row.create_sent is not None:
            row.batch_id = _find_created(client, target, row)
        if not row.batch_id:
            ProviderBatch.objects.filter(id=row.id).update(status=Status.CANCELLED, cancel_sent=timezone.now())
            continue
        try:
            found = _control(target, partial(client.batches.cancel, row.batch_id))
            status = found.status
        except openai.ConflictError:
            status = Status.CANCELLED  # it had ended meanwhile: nothing to cancel
        ProviderBatch.objects.filter(id=row.id).update(status=status, cancel_sent=timezone.now())
        asked += 1
    return asked
