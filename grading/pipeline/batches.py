"""A grading task's work: claim one batch, do what is missing of it, store the results.

1. Claim: a conditional update takes the batch if it is queued, or running under a lease
   that ran out (its worker died). ``claims`` goes up by one and fences the claim: a worker
   that lost its batch finds out at its next renewal and stops.
2. Sample, for a run on a subset: the conversations' missing samples, then
3. grade what is missing: the batch's (response, criterion) items without a grade in this
   run, in the requests of the run's grading mode (grading.pipeline.modes: one call per item
   or, per response, one call per chunk of a response's criteria, whose unusable entries are
   graded by calls of their own). An identical earlier request reuses its grades (the cache, unless the run
   is off it); the rest go to the process's event loop (grading.pipeline.engine), many
   calls at once.
4. Store the results every FLUSH_SECONDS, with ON CONFLICT DO NOTHING: the database holds
   one grade per (run, response, criterion) and per position, whoever else graded it. The
   same transaction renews the lease, which fails when the run was cancelled or the batch
   claimed by another worker.
5. End: done (then maybe the run is done), or, after WORK_SECONDS, handed back and queued
   again so that no task nears Celery's time limit; after an error, handed back and
   queued again with a delay, until it has failed MAX_BATCH_FAILURES times.

Failing fast: an endpoint that breaks the operator's policy, a key that is not set, a host
that does not resolve (checked before any call), or a FailureWatch that trips during the
work (a refused connection, a redirect, 401/403/404, an exhausted quota, a 400 that rejects
a parameter or the model, GRADING_FAILURE_STREAK failures of one kind in a row, whatever
their status; see grading.pipeline.client)
fails the whole run with that reason and cancels its other batches, whose tasks notice at
their next flush (FLUSH_SECONDS) and end. So a failing run holds a worker process for about
one retry budget at most, not for the whole run.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from grading.models import Grade, Run, RunBatch
from grading.pipeline import client as llm
from grading.pipeline import engine
from grading.pipeline.batch_requests import (
    GraderRequest,
    Item,
    cached_outcomes,
    items_regraded,
    items_sampled,
)
from grading.pipeline.client import (
    ChatReply,
    FailureWatch,
    GradeOutcome,
    RetryPolicy,
    ask_grader,
    ask_grader_chunk,
)
from grading.pipeline.endpoint import CallTarget, EndpointConfigError
from grading.pipeline.failure_log import failures_note
from grading.pipeline.modes import FALLBACK, mode_of
from grading.pipeline.provider_batches import BatchFatal, Request, provider_batches_work
from grading.pipeline.rate_limit import limiter_for_loop
from grading.pipeline.runs import (
    MAX_BATCH_FAILURES,
    batches_queue,
    run_fail,
    run_finish_if_complete,
    run_progress_step,
)
from grading.pipeline.sampling import (
    SampleJob,
    ask_policy,
    sample_jobs_missing,
    sample_messages,
    samples_store,
)
from grading.pipeline.slots import slots_for_run
from healthbench_web.celery import app as celery_app
from healthbench_web.redact import endpoint_keys, redact
from healthbench_web.storable import RAW_ANSWER_CHARS, REASON_CHARS, storable

log = logging.getLogger(__name__)
FLUSH_SECONDS = 0.5


class Outcome(enum.StrEnum):
    SKIPPED = "skipped"  # not claimable: done, cancelled, or another worker has it
    DONE = "done"
    PAUSED = "paused"  # worked WORK_SECONDS: handed back and queued again
    STOPPED = "stopped"  # the run was cancelled or the claim lost
    FAILED = "failed"  # the run cannot work (configuration, or its endpoint failed fatally)
    WAITING = "waiting"  # its provider batches are not done: handed back, polled again later


def lease() -> timedelta:
    return timedelta(seconds=settings.GRADING_LEASE_SECONDS)


def work_seconds() -> float:
    return min(240.0, settings.CELERY_TASK_SOFT_TIME_LIMIT / 2)


@dataclass
class Claim:
    batch: RunBatch
    token: int

    def _mine(self):
        return RunBatch.objects.filter(id=self.batch.id, claims=self.token, status=RunBatch.Status.RUNNING)

    def renew(self) -> bool:
        """Extend the lease; False when the batch is no longer ours (cancelling a run
        cancels its batches, and another claim changes the token)."""
        now = timezone.now()
        return self._mine().update(lease_until=now + lease(), touched=now) == 1

    def finish(self, *, failed_samples: int = 0) -> bool:
        return (
            self._mine().update(
                status=RunBatch.Status.DONE,
                lease_until=None,
                touched=timezone.now(),
                failed_samples=failed_samples,
                error="",
            )
            == 1
        )

    def hand_back(self, *, error: str = "") -> str | None:
        """Queue the batch again (after an error: count it, or give up). Returns the new status."""
        failed = bool(error)
        status = (
            Case(
                When(failures__gte=MAX_BATCH_FAILURES - 1, then=Value(RunBatch.Status.FAILED)),
                default=Value(RunBatch.Status.QUEUED),
            )
            if failed
            else Value(RunBatch.Status.QUEUED)
        )
        if not self._mine().update(
            status=status,
            lease_until=None,
            touched=timezone.now(),
            failures=F("failures") + (1 if failed else 0),
            error=storable(error, REASON_CHARS),
        ):
            return None
        return RunBatch.objects.values_list("status", flat=True).get(id=self.batch.id)


def batch_claim(*, batch_id: int) -> Claim | None:
    """Take the batch, or None. The update filters on the batch's own columns only: with a
    join, PostgreSQL would not re-check a row that a concurrent claim just changed, and both
    claims could succeed. (A batch of a run that is not running is never queued or running.)"""
    now = timezone.now()
    claimable = Q(status=RunBatch.Status.QUEUED) | Q(status=RunBatch.Status.RUNNING, lease_until__lt=now)
    if not RunBatch.objects.filter(claimable, id=batch_id).update(
        status=RunBatch.Status.RUNNING, claims=F("claims") + 1, lease_until=now + lease(), touched=now
    ):
        return None
    batch = RunBatch.objects.select_related(
        "run__grader_config", "run__policy_config", "run__subset", "run__subset_version__subset"
    ).get(id=batch_id)
    return Claim(batch=batch, token=batch.claims)


def batch_run(*, batch_id: int, retry: RetryPolicy | None = None) -> Outcome:
    """Everything the task does, from claim to end."""
    claim = batch_claim(batch_id=batch_id)
    if claim is None:
        log.info("batch %s not claimed: done, cancelled or taken", batch_id, extra={"batch": batch_id})
        return Outcome.SKIPPED
    run_id = claim.batch.run_id
    where = {"run": claim.batch.run.name, "batch": claim.batch.number, "claim": claim.token}
    log.info("run %r batch %d claimed (%d items)", where["run"], claim.batch.number, claim.batch.items, extra=where)
    try:
        outcome, failed_samples, reason = _work(claim, retry or llm.DEFAULT_RETRY)
    except EndpointConfigError as exc:
        run_fail(run_id=run_id, error=str(exc))
        return Outcome.FAILED
    except Exception as exc:
        status = claim.hand_back(error=redact(f"{type(exc).__name__}: {exc}", endpoint_keys()))
        log.exception(
            "run %r batch %d failed (%s)", where["run"], claim.batch.number, status or "no longer ours", extra=where
        )
        if status == RunBatch.Status.QUEUED:
            batches_queue([batch_id], countdown=2.0**claim.batch.failures)
        else:
            run_finish_if_complete(run_id=run_id)
        raise
    if outcome is Outcome.FAILED:
        run_fail(run_id=run_id, error=reason)
    elif outcome is Outcome.PAUSED:
        if claim.hand_back():
            batches_queue([batch_id])
    elif outcome is Outcome.WAITING:
        if celery_app.conf.task_always_eager:
            time.sleep(settings.GRADING_BATCH_POLL_SECONDS)  # the countdown is ignored there
        if claim.hand_back():
            batches_queue([batch_id], countdown=settings.GRADING_BATCH_POLL_SECONDS)
    elif outcome is Outcome.DONE and claim.finish(failed_samples=failed_samples):
        run_progress_step(run_id=run_id)
        run_finish_if_complete(run_id=run_id)
    log.info("run %r batch %d %s", where["run"], claim.batch.number, outcome, extra={**where, "outcome": str(outcome)})
    return outcome


# --- the work -------------------------------------------------------------------------------


def _target(config) -> CallTarget:
    """The call target of a snapshot, checked: the operator's policy, the key set, the host
    resolving. Raises EndpointConfigError, which fails the run now rather than once per call."""
    target = CallTarget.of(config)
    target.check()
    target.api_key()
    return target


def _work(claim: Claim, retry: RetryPolicy) -> tuple[Outcome, int, str]:
    batch, run = claim.batch, claim.batch.run
    deadline = time.monotonic() + work_seconds()
    grader = _target(run.grader_config)
    watch = FailureWatch(settings.GRADING_FAILURE_STREAK)
    failed_samples = 0
    if batch.conversation_ids:
        policy = _target(run.policy_config)
        outcome, failed_samples = _sample(claim, policy, retry, deadline, watch)
        if watch.reason is not None:
            return Outcome.FAILED, failed_samples, f"policy endpoint {policy.name}: {watch.reason}"
        if outcome is not Outcome.DONE:
            return outcome, failed_samples, ""
        items = items_sampled(run, batch.conversation_ids)
    else:
        items = items_regraded(run, batch.response_ids)
    have = set(
        Grade.objects.filter(run=run, response_id__in={i.response_id for i in items}).values_list(
            "response_id", "position"
        )
    )
    whole = items
    items = [i for i in items if (i.response_id, i.position) not in have]
    if not items:
        return Outcome.DONE, failed_samples, ""

    mode = mode_of(run.grader_config.grading_mode if run.grader_config is not None else "")
    run_mode = mode.name
    requests = mode.requests(run, grader, items)
    if run.use_cache:
        reused = cached_outcomes([key for chunk in requests.values() for key in chunk.keys])
        rows = []
        for request_key_ in list(requests):  # a request is reused only whole
            request = requests[request_key_]
            if all(key in reused for key in request.keys):
                rows += [
                    _grade_row(run.id, item, key, reused[key], reused=True, mode=reused[key].mode or run_mode)
                    for chunk in request.items
                    for item, key in zip(chunk, request.keys, strict=True)
                ]
                del requests[request_key_]
        if rows and not _write(claim, rows):
            return Outcome.STOPPED, failed_samples, ""

    if run.batch and not batch.live:
        # Requests cut from all the batch's items, not only the missing ones, so that a chunk
        # partly stored (its fallbacks still at the provider) keeps its key across claims.
        missing = {(i.response_id, i.position) for i in items}
        everything = mode.requests(run, grader, whole)
        pending = {
            key: request
            for key, request in everything.items()
            if any((i.response_id, i.position) in missing for chunk in request.items for i in chunk)
        }
        outcome, reason = _through_provider_batches(claim, run, grader, pending, run_mode, retry)
        return outcome, failed_samples, reason

    def rows_of(results: list[tuple[str, list[GradeOutcome]]]) -> list[Grade]:
        failures_note(run, "grader", [o.error for _, outcomes in results for o in outcomes if o.met is None])
        # Items with the same request (rare: a response repeated) share one call. A fatal
        # outcome is the run's failure, not the item's: left missing for a resume.
        return [
            _grade_row(run.id, item, key, outcome, reused=n > 0, mode=FALLBACK if outcome.fallback else run_mode)
            for request_key_, outcomes in results
            for n, chunk in enumerate(requests[request_key_].items)
            for item, key, outcome in zip(chunk, requests[request_key_].keys, outcomes, strict=True)
            if not outcome.fatal
        ]

    async def ask(request: GraderRequest, limiter) -> list[GradeOutcome]:
        subject = f"response {request.items[0][0].response_id}"  # what a content filter refuses
        if request.fallbacks is None:
            return [
                await ask_grader(grader, request.prompt, limiter=limiter, policy=retry, watch=watch, subject=subject)
            ]
        return await ask_grader_chunk(
            grader,
            request.prompt,
            len(request.keys),
            request.fallbacks.__getitem__,
            limiter=limiter,
            policy=retry,
            watch=watch,
            subject=subject,
        )

    async def grade_all(emit, stop) -> None:
        limiter = limiter_for_loop()
        watch.on_trip = stop.set  # no new call starts once the endpoint is known to fail
        await engine.run_lanes(
            list(requests),
            lambda key: ask(requests[key], limiter),
            emit,
            concurrency=run.concurrency,
            slots=slots_for_run(run.id, run.concurrency),
            stop=stop,
        )

    failing = lambda: f"grader endpoint {grader.name}: {watch.reason}" if watch.reason is not None else None  # noqa: E731
    outcome = _drive(claim, grade_all, rows_of, deadline, failing=failing) if requests else Outcome.DONE
    if watch.reason is not None and outcome is not Outcome.STOPPED:
        return Outcome.FAILED, failed_samples, f"grader endpoint {grader.name}: {watch.reason}"
    return outcome, failed_samples, ""


def _through_provider_batches(
    claim: Claim,
    run: Run,
    grader: CallTarget,
    requests: dict[str, GraderRequest],
    run_mode: str,
    retry: RetryPolicy,
) -> tuple[Outcome, str]:
    """A batched run's step (grading.pipeline.provider_batches): the requests without their
    grades go to the provider's Batch API, and come back as grades of the same rows as live
    ones (a chunk's fallbacks as per-criterion grades)."""

    def rows_for(request: GraderRequest) -> Callable[[dict[int, GradeOutcome]], list[Grade]]:
        # Items with the same request (rare: a response repeated) share its line, as they
        # share a live call.
        return lambda outcomes: [
            _grade_row(
                run.id,
                chunk[i],
                request.keys[i],
                outcome,
                reused=n > 0,
                mode=FALLBACK if outcome.fallback else run_mode,
            )
            for n, chunk in enumerate(request.items)
            for i, outcome in outcomes.items()
        ]

    lines = {key: Request(r.prompt, rows_for(r), fallbacks=r.fallbacks) for key, r in requests.items()}
    try:
        state = provider_batches_work(
            claim=claim, run=run, target=grader, requests=lines, format_attempts=retry.format_attempts
        )
    except BatchFatal as exc:
        return Outcome.FAILED, f"grader endpoint {grader.name}: {exc}"
    return {"done": Outcome.DONE, "waiting": Outcome.WAITING, "stopped": Outcome.STOPPED}[state], ""


def _sample(
    claim: Claim, policy: CallTarget, retry: RetryPolicy, deadline: float, watch: FailureWatch
) -> tuple[Outcome, int]:
    run, conversation_ids = claim.batch.run, claim.batch.conversation_ids
    jobs = sample_jobs_missing(run, conversation_ids)
    if not jobs:
        return Outcome.DONE, 0
    messages = sample_messages(conversation_ids)
    failed = 0

    def store(results: list[tuple[SampleJob, ChatReply | llm.CallFailed]]) -> list:
        nonlocal failed
        failed += sum(1 for _, r in results if isinstance(r, llm.CallFailed) and not r.fatal)
        failures_note(run, "policy", [str(r) for _, r in results if isinstance(r, llm.CallFailed)])
        return results

    async def sample_all(emit, stop) -> None:
        limiter = limiter_for_loop()
        watch.on_trip = stop.set
        await engine.run_lanes(
            jobs,
            lambda job: ask_policy(policy, messages[job.conversation_id], limiter=limiter, policy=retry, watch=watch),
            emit,
            concurrency=run.concurrency,
            slots=slots_for_run(run.id, run.concurrency),
            stop=stop,
        )

    outcome = _drive(
        claim,
        sample_all,
        store,
        deadline,
        save=lambda replies: samples_store(run, policy, replies),
        failing=lambda: f"policy endpoint {policy.name}: {watch.reason}" if watch.reason is not None else None,
    )
    return outcome, failed


def _grade_row(
    run_id: int, item: Item, key: str, outcome: GradeOutcome, *, reused: bool, mode: str = FALLBACK
) -> Grade:
    return Grade(
        mode=mode,
        run_id=run_id,
        response_id=item.response_id,
        criterion_id=item.criterion_id,
        position=item.position,
        criterion_text=item.text,
        points=item.points,
        tags=item.tags,
        status=Grade.Status.FAILED if outcome.met is None else Grade.Status.GRADED,
        met=outcome.met,
        # A provider's words: made storable here, the one place a grade row is made.
        explanation=storable(outcome.explanation, RAW_ANSWER_CHARS),
        raw_output=storable(outcome.raw_output, RAW_ANSWER_CHARS),
        error=storable(outcome.error, REASON_CHARS),
        attempts=0 if reused else outcome.attempts,
        prompt_tokens=0 if reused else outcome.prompt_tokens,
        completion_tokens=0 if reused else outcome.completion_tokens,
        cached_tokens=0 if reused else outcome.cached_tokens,
        reasoning_tokens=0 if reused else outcome.reasoning_tokens,
        cache_write_tokens=0 if reused else outcome.cache_write_tokens,
        reused=reused,
        request_key=key,
    )


# --- driving the event loop from the task's thread -------------------------------------------


def _write(claim: Claim, rows: list, save: Callable[[list], Any] | None = None) -> bool:
    """Store rows and renew the lease in one transaction; False: stop (cancelled, or lost)."""
    with transaction.atomic():
        if rows:
            (save or _save_grades)(rows)
        return claim.renew()


def _save_grades(rows: list[Grade]) -> None:
    Grade.objects.bulk_create(rows, ignore_conflicts=True)


class _Stop(threading.Event):
    """The stop of a batch's calls, which also wakes the thread storing their results."""

    def __init__(self, wake: threading.Event):
        super().__init__()
        self._wake = wake

    def set(self) -> None:
        super().set()
        self._wake.set()


def _drive(
    claim: Claim,
    coroutine: Callable[[Callable, threading.Event], Coroutine],
    convert: Callable[[list], list],
    deadline: float,
    *,
    save: Callable[[list], Any] | None = None,
    failing: Callable[[], str | None] = lambda: None,
) -> Outcome:
    """Run `coroutine(emit, stop)` on the event loop; store what it emits, every FLUSH_SECONDS.

    Once `failing()` gives a reason (the batch's FailureWatch tripped: a fatal answer, or a
    streak), the run fails at once, with the calls still in flight: its other batches are
    cancelled, so none of them, on any worker, sends another request, and none not yet
    claimed starts. (Waiting for the calls in flight first let a batch claimed meanwhile
    send a whole round of requests to an endpoint already known to fail.)

    The loop appends results to a list that this thread takes every FLUSH_SECONDS. Waking
    this thread for each result instead would make the two threads trade the GIL hundreds
    of times a second, and every trade stalls the event loop for up to a switch interval."""
    results: list = []
    finished = threading.Event()
    wake = threading.Event()  # the coroutine ended, or was told to stop
    stop = _Stop(wake)
    future = engine.submit(coroutine(lambda job, result: results.append((job, result)), stop))

    def ended(_: object) -> None:
        finished.set()
        wake.set()

    future.add_done_callback(ended)
    outcome = Outcome.DONE
    failed = False
    try:
        while True:
            wake.wait(timeout=FLUSH_SECONDS)
            wake.clear()
            done = finished.is_set()
            reason = failing()
            if reason is not None and not failed:
                run_fail(run_id=claim.batch.run_id, error=reason)
                failed = True
            taken = results[:]
            del results[: len(taken)]  # the loop only appends: what came meanwhile stays
            if not _write(claim, convert(taken), save) and not done:
                # Cancelled (by the run's failure, when it is this batch's), or another worker has
                # the batch: drop the calls in flight.
                outcome = Outcome.FAILED if failed else Outcome.STOPPED
                stop.set()
                future.cancel()
            if outcome is Outcome.DONE and not done and time.monotonic() > deadline:
                outcome = Outcome.PAUSED
                stop.set()
            if done and not results:
                break
    finally:
        if not future.done():
            stop.set()
            future.cancel()
    if outcome in (Outcome.STOPPED, Outcome.FAILED):
        return outcome
    future.result()  # an error in the loop is a bug: raise it here
    return outcome
