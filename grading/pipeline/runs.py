"""Services of a grading run's life after launch (grading.pipeline.run_launch): queueing its
batches, resume, cancel, fail, finish, progress steps, and the sweep that recovers the work of
dead workers. Commands, pages and tasks call these; none of them writes runs itself.

A run's work is cut into RunBatches at launch; each batch is one Celery task, queued when
the transaction commits. The batch task (grading.pipeline.batches) claims its batch with a
conditional update and keeps it under a renewed lease. The run is done when none of its
batches is queued or running: whichever task ends last flips it, with a conditional update.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Case, Count, Exists, F, OuterRef, Q, Value, When
from django.db.models.expressions import CombinedExpression
from django.utils import timezone

from grading.endpoint_rules import endpoint_problems
from grading.models import Grade, ProviderBatch, Run, RunBatch, SampleFailure
from grading.pipeline.estimate import RunSpecError
from grading.pipeline.foreign import batch_headers
from grading.pipeline.provider_errors import UNGRADABLE
from healthbench_web.celery import app as celery_app
from healthbench_web.celery import broker_ping
from healthbench_web.redact import endpoint_keys, redact
from healthbench_web.storable import REASON_CHARS, storable

# The name grading.pipeline.tasks.grade_batch is registered under (the name it had before
# the move, so that messages queued by an older release still reach it).
GRADE_BATCH_TASK = "grading.tasks.grade_batch"
WARM_REPORT_TASK = "grading.tasks.warm_report"
CANCEL_PROVIDER_BATCHES_TASK = "grading.tasks.cancel_provider_batches"

MAX_BATCH_FAILURES = 5  # claims of one batch that ended without finishing: then it is given up
OPEN = (RunBatch.Status.QUEUED, RunBatch.Status.RUNNING)
# A running run's report is recomputed at most this many times while its batches finish (each
# twentieth of them moves Run.report_version on), plus once when it ends.
REPORT_STEPS = 20

log = logging.getLogger(__name__)

BROKER_TIMEOUT_SECONDS = 2


class QueueUnavailable(Exception):
    """The broker cannot take a run's tasks right now; nothing of the run was stored."""

    def __init__(self, error: Exception):
        self.cause = type(error).__name__  # the transport's error class, for other sentences about it
        super().__init__(
            f"Grading runs cannot be started right now: the task queue is unreachable ({type(error).__name__}). "
            "Nothing was stored; launch again once it is back (/healthz/ says what is down)."
        )


def queue_check() -> None:
    """Raise QueueUnavailable unless the broker answers (a server broker; the filesystem one
    cannot be down). Checked before a launch writes anything."""
    if celery_app.conf.task_always_eager:
        return
    try:
        broker_ping(BROKER_TIMEOUT_SECONDS)
    except Exception as exc:
        log.warning("launch refused: broker unreachable (%s: %s)", type(exc).__name__, exc)
        raise QueueUnavailable(exc) from None


def next_report_version() -> CombinedExpression:
    return F("report_version") + 1


def batch_size_for(concurrency: int, remaining: int) -> int:
    """Grades for the next batch, with `remaining` grades still to cut into batches.

    Up to 20 rounds of the run's concurrency: a worker process changing batches hands its
    slots over, ends a task and starts the next, and with smaller batches these changes
    cost a run a tenth of its throughput (bench/grading_bench.py). Batches shrink towards
    the end of the run (a sixth of what is left, down to 2 rounds), so that the last ones
    keep several worker processes busy instead of leaving one to finish a large batch alone."""
    return max(2 * concurrency, 40, min(20 * concurrency, remaining // 6))


def batches_queue(batch_ids: list[int], *, countdown: float | None = None, launched_run: int | None = None) -> None:
    """Queue one task per batch when the current transaction commits: on the sampling queue
    for a run that samples a policy model, on the grading queue otherwise.

    The broker was checked just before, but may go away in between: then the batches stay
    queued in the database for `grade --resume` (or the sweep) to send again, and the run of a
    launch (`launched_run`) is marked failed with the reason, instead of sitting there unsent."""
    if not batch_ids:
        return
    # Each message names its run, so that a worker of another database hands it on instead
    # of dropping it (grading.pipeline.foreign).
    runs = {
        batch_id: (code, policy is not None)
        for batch_id, code, policy in RunBatch.objects.filter(id__in=batch_ids).values_list(
            "id", "run__code", "run__policy_config"
        )
    }
    queues = [
        (
            batch_id,
            settings.CELERY_SAMPLING_QUEUE if runs.get(batch_id, (None, False))[1] else settings.CELERY_GRADING_QUEUE,
            batch_headers(runs[batch_id][0]) if batch_id in runs else {},
        )
        for batch_id in batch_ids
    ]
    transaction.on_commit(partial(_send_batches, queues, countdown, launched_run))


def _send_batches(
    queues: list[tuple[int, str, dict[str, str]]], countdown: float | None, launched_run: int | None
) -> None:
    # Looked up by name in Celery's registry rather than imported: the tasks module calls
    # these services, so importing it here would tie the two in a circle.
    grade_batch = celery_app.tasks[GRADE_BATCH_TASK]
    for sent, (batch_id, queue, headers) in enumerate(queues):
        try:
            grade_batch.apply_async((batch_id,), countdown=countdown, queue=queue, headers=headers)
        except Exception as exc:
            log.error("could not queue %d batch(es): %s: %s", len(queues) - sent, type(exc).__name__, exc)
            if launched_run is not None:
                run_fail(
                    run_id=launched_run,
                    error=f"the task queue went away while the run was launched ({type(exc).__name__}); "
                    "resume it once the queue is back",
                )
            return


def run_cancel(*, run: Run) -> bool:
    """Stop a pending or running run; its tasks notice within a second or so and stop."""
    now = timezone.now()
    with transaction.atomic():
        if not Run.objects.filter(id=run.id, status__in=(Run.Status.PENDING, Run.Status.RUNNING)).update(
            status=Run.Status.CANCELLED, finished=now, report_version=next_report_version()
        ):
            return False
        RunBatch.objects.filter(run=run, status__in=OPEN).update(
            status=RunBatch.Status.CANCELLED, lease_until=None, touched=now
        )
        provider_batches_cancel_queue(run_ids=[run.id])
    log.info("run %r cancelled", run.name, extra={"run": run.name, "status": Run.Status.CANCELLED})
    return True


def provider_batches_cancel_queue(*, run_ids: list[int]) -> None:
    """Cancel the open provider batches of runs that stopped, from a worker, once the
    transaction commits (the provider is not called inside a web request). A message lost
    with its worker is caught by the sweep."""
    run_ids = list(
        ProviderBatch.objects.filter(run_id__in=run_ids, collected=False).values_list("run_id", flat=True).distinct()
    )
    if not run_ids or CANCEL_PROVIDER_BATCHES_TASK not in celery_app.tasks:
        return
    task = celery_app.tasks[CANCEL_PROVIDER_BATCHES_TASK]

    def send() -> None:
        for run_id in run_ids:
            try:
                task.apply_async((run_id,))
            except Exception as exc:  # the sweep sends it again
                log.error("could not queue the cancel of run %d's provider batches: %s", run_id, exc)
                return

    transaction.on_commit(send)


def run_fail(*, run_id: int, error: str) -> None:
    """End a run that cannot work at all (its API key is not set, its grader refuses
    connections), with the reason; its other batches are cancelled, and their tasks stop.

    It never leaves the run running: a reason the database refuses all the same gives way to
    a fixed one. (A reason with a NUL once made it raise, the lease sweep queued the batches
    again, and the run looped until cancelled.)"""
    # A provider's words, stored and shown: never a key, never a character PostgreSQL refuses.
    error = storable(redact(storable(error, REASON_CHARS * 4), endpoint_keys()), REASON_CHARS)
    try:
        _run_fail(run_id, error)
    except DatabaseError as exc:
        log.exception("run %s: its failure reason could not be stored", run_id, extra={"run_id": run_id})
        _run_fail(run_id, f"the run failed; its reason could not be stored ({type(exc).__name__})")


def _run_fail(run_id: int, error: str) -> None:
    now = timezone.now()
    with transaction.atomic():
        failed = Run.objects.filter(id=run_id, status=Run.Status.RUNNING).update(
            status=Run.Status.FAILED, error=error, finished=now, report_version=next_report_version()
        )
        RunBatch.objects.filter(run_id=run_id, status__in=OPEN).update(
            status=RunBatch.Status.CANCELLED, lease_until=None, touched=now
        )
        if failed:
            provider_batches_cancel_queue(run_ids=[run_id])
    if failed:
        name = Run.objects.values_list("name", flat=True).get(id=run_id)
        log.error("run %r failed: %s", name, error, extra={"run": name, "status": Run.Status.FAILED})


def run_finish_if_complete(*, run_id: int) -> bool:
    """Flip a running run to done once no batch is open; or to failed when a batch was
    given up, or when not one grade succeeded (every grade, or every sample, failed): a run
    never ends "done" with nothing to show. Conditional, so of two tasks ending together
    exactly one flips it."""
    batches = RunBatch.objects.filter(run=OuterRef("pk"))
    graded = Grade.objects.filter(run=OuterRef("pk"), status=Grade.Status.GRADED)
    flipped = bool(
        Run.objects.filter(id=run_id, status=Run.Status.RUNNING)
        .filter(~Exists(batches.filter(status__in=OPEN)))
        .update(
            status=Case(
                When(Exists(batches.filter(status=RunBatch.Status.FAILED)), then=Value(Run.Status.FAILED)),
                When(~Exists(graded), then=Value(Run.Status.FAILED)),
                default=Value(Run.Status.DONE),
            ),
            finished=timezone.now(),
            report_version=next_report_version(),
        )
    )
    if flipped:
        reason = storable(_failure_reason(run_id), REASON_CHARS)
        Run.objects.filter(id=run_id, status=Run.Status.FAILED, error="").update(error=reason)
        _log_run_end(run_id)
        report_warm(run_id=run_id)
    return flipped


def _failure_reason(run_id: int) -> str:
    """Why a run that ended without a verdict failed: the commonest error of its grades,
    samples or batches."""
    for query, what in (
        (RunBatch.objects.filter(run_id=run_id, status=RunBatch.Status.FAILED).exclude(error=""), "a batch"),
        (SampleFailure.objects.filter(run_id=run_id), "every sample failed"),
        (Grade.objects.filter(run_id=run_id, status=Grade.Status.FAILED), "every grade failed"),
    ):
        top = query.values("error").annotate(n=Count("id")).order_by("-n").first()
        if top:
            return f"{what}: {top['error']} ({top['n']:,}×)" if what != "a batch" else top["error"]
    return "no grade succeeded"


def _log_run_end(run_id: int) -> None:
    run = Run.objects.get(id=run_id)
    counts = Grade.objects.filter(run=run).aggregate(
        graded=Count("id", filter=Q(status=Grade.Status.GRADED)),
        failed=Count("id", filter=Q(status=Grade.Status.FAILED)),
    )
    seconds = (run.finished - run.started).total_seconds() if run.finished and run.started else None
    log.log(
        logging.INFO if run.status == Run.Status.DONE else logging.ERROR,
        "run %r ended %s: %d graded, %d failed of %d%s",
        run.name,
        run.status,
        counts["graded"],
        counts["failed"],
        run.total_items,
        f" ({run.error})" if run.error else "",
        extra={"run": run.name, "status": run.status, "seconds": seconds},
    )


def report_warm(*, run_id: int) -> None:
    """Compute the ended run's report and meta-eval in a worker, which keeps them in the
    database (grading.reports.stored) and the shared cache: its page and downloads then open
    at once on every web process, after a cache flush or a restart too."""
    if WARM_REPORT_TASK not in celery_app.tasks:
        return
    transaction.on_commit(partial(_send_warm, run_id))


def _send_warm(run_id: int) -> None:
    try:
        celery_app.tasks[WARM_REPORT_TASK].apply_async((run_id,))
    except Exception as exc:
        # The first reader computes and stores it instead.
        log.warning("could not queue the report of run %d: %s: %s", run_id, type(exc).__name__, exc)


def run_progress_step(*, run_id: int) -> None:
    """A batch of the run finished: move its report version on when that completes another
    REPORT_STEPS-th of the batches, so that a running run's report is recomputed a bounded
    number of times, however many batches it has. (Two batches ending together may both
    see the same count: a step is then skipped or taken twice, which costs nothing.)"""
    counts = RunBatch.objects.filter(run_id=run_id).aggregate(
        total=Count("id"), done=Count("id", filter=Q(status=RunBatch.Status.DONE))
    )
    total, done = counts["total"], counts["done"]
    if total and done and done * REPORT_STEPS // total != (done - 1) * REPORT_STEPS // total:
        Run.objects.filter(id=run_id).update(report_version=next_report_version())


def _grades_per_batch(run: Run) -> dict[int, int]:
    batches = list(run.batches.values_list("id", "response_ids", "conversation_ids"))
    if run.plan != Run.Plan.SUBSET_VERSION:
        batch_of = {r: b for b, response_ids, _ in batches for r in response_ids}
        counts = Grade.objects.filter(run=run).values_list("response_id").annotate(n=Count("id")).order_by()
    else:
        batch_of = {c: b for b, _, conversation_ids in batches for c in conversation_ids}
        counts = (
            Grade.objects.filter(run=run).values_list("response__conversation_id").annotate(n=Count("id")).order_by()
        )
    per_batch: dict[int, int] = {}
    for unit, n in counts:
        if unit in batch_of:
            per_batch[batch_of[unit]] = per_batch.get(batch_of[unit], 0) + n
    return per_batch


def resume_check(*, run: Run) -> None:
    """A resume is checked as a launch is: the key variables and base URLs the run's endpoint
    snapshots name must pass the operator's rules now, or nothing is queued (the worker would
    refuse every batch). Raises RunSpecError naming each problem."""
    problems = []
    for role, config in (("grader", run.grader_config), ("policy", run.policy_config)):
        if config is None:
            continue
        name = config.endpoint_name or config.model
        problems += [
            f"{role} endpoint {name}: {problem}"
            for problem in endpoint_problems(base_url=config.base_url, key_variable=config.api_key_env, resolve=False)
        ]
    if problems:
        raise RunSpecError([*problems, "nothing was queued: a curator fixes the endpoint, then resume again"])


def run_resume(*, run: Run, retry_failed: bool = False, live: bool | None = None) -> int:
    """Queue again only the batches that miss grades, and are not being worked on now.

    With `retry_failed`, failed grades are deleted first and so graded again, except those
    the provider refused for their conversation (a content filter, the context length). A batched run
    retries them in new provider batches, or by live calls with `live` (then its batches
    queued here are graded live from now on; `live=False` turns them back to batches).
    Returns the number of batches queued; 0 means the run is complete (it is then marked done)."""
    if run.grader_config_id is None:
        raise RunSpecError([f"run {run.name!r} was imported, not graded here: nothing to resume"])
    if run.plan == Run.Plan.STORED:
        raise RunSpecError([f"run {run.name!r} has no plan beyond its stored grades: nothing to resume"])
    resume_check(run=run)
    queue_check()
    now = timezone.now()
    with transaction.atomic():
        if retry_failed:
            # Not those the provider refuses for their conversation: no retry can fix them.
            Grade.objects.filter(run=run, status=Grade.Status.FAILED).exclude(error__startswith=UNGRADABLE).delete()
            SampleFailure.objects.filter(run=run).delete()
        have = _grades_per_batch(run)
        leased = Q(status=RunBatch.Status.RUNNING, lease_until__gte=now)
        again = [
            batch_id
            for batch_id, items in run.batches.exclude(leased).values_list("id", "items")
            if have.get(batch_id, 0) < items
        ]
        RunBatch.objects.filter(id__in=again).update(
            status=RunBatch.Status.QUEUED, lease_until=None, touched=now, failures=0, error=""
        )
        if run.batch and live is not None:
            RunBatch.objects.filter(id__in=again).update(live=live)
        if again or run.batches.filter(leased).exists():
            Run.objects.filter(id=run.id).update(
                status=Run.Status.RUNNING, finished=None, error="", report_version=next_report_version()
            )
        else:
            RunBatch.objects.filter(run=run).exclude(status=RunBatch.Status.DONE).update(
                status=RunBatch.Status.DONE, lease_until=None, touched=now
            )
            Run.objects.filter(id=run.id).update(status=Run.Status.RUNNING)
            run_finish_if_complete(run_id=run.id)
        batches_queue(again)
    run.refresh_from_db()
    log.info(
        "run %r resumed: %d batch(es) queued again", run.name, len(again), extra={"run": run.name, "status": run.status}
    )
    return len(again)


def runs_sweep() -> list[int]:
    """Queue again the batches whose worker died; returns their ids. Every worker runs this
    every GRADING_SWEEP_SECONDS; each step is a conditional update, so sweeps may overlap.

    * A running batch whose lease ran out lost its worker: queued again, or given up after
      MAX_BATCH_FAILURES such ends.
    * Queued batches while no batch at all was touched for a long while lost their messages
      (the filesystem broker drops the messages a killed worker held): they are sent again,
      once per stall period. Workers busy with anything keep touching their batches, so a
      long queue is not taken for lost. A duplicate message is harmless: its claim fails.
    * A batched run's queued batch untouched for longer than a poll and four leases lost its
      poll message: sent again.
    """
    now = timezone.now()
    queued: list[int] = []
    expired = RunBatch.objects.filter(
        status=RunBatch.Status.RUNNING, lease_until__lt=now, run__status=Run.Status.RUNNING
    ).values_list("id", "run_id", "failures")
    for batch_id, run_id, failures in list(expired):
        still = RunBatch.objects.filter(id=batch_id, status=RunBatch.Status.RUNNING, lease_until__lt=now)
        if failures + 1 >= MAX_BATCH_FAILURES:
            if still.update(
                status=RunBatch.Status.FAILED,
                failures=F("failures") + 1,
                lease_until=None,
                touched=now,
                error=f"given up: its worker died or its task failed {failures + 1} times",
            ):
                run_finish_if_complete(run_id=run_id)
        elif still.update(status=RunBatch.Status.QUEUED, failures=F("failures") + 1, lease_until=None, touched=now):
            queued.append(batch_id)
    # A batched run's waiting batch is touched at every poll: one untouched for longer than a
    # poll and a few leases lost its message with its worker (an ETA message the filesystem
    # broker drops), while other batches keep the run from looking stalled.
    quiet = now - timedelta(seconds=settings.GRADING_BATCH_POLL_SECONDS + 4 * settings.GRADING_LEASE_SECONDS)
    waiting = RunBatch.objects.filter(
        status=RunBatch.Status.QUEUED, run__status=Run.Status.RUNNING, run__batch=True, live=False, touched__lt=quiet
    )
    for batch_id in list(waiting.values_list("id", flat=True)):
        if RunBatch.objects.filter(id=batch_id, status=RunBatch.Status.QUEUED, touched__lt=quiet).update(touched=now):
            queued.append(batch_id)
    stall = now - timedelta(seconds=4 * settings.GRADING_LEASE_SECONDS)
    if not RunBatch.objects.filter(touched__gte=stall).exists():
        stalled = RunBatch.objects.filter(status=RunBatch.Status.QUEUED, run__status=Run.Status.RUNNING)
        for batch_id in list(stalled.values_list("id", flat=True)):
            if RunBatch.objects.filter(id=batch_id, status=RunBatch.Status.QUEUED, touched__lt=stall).update(
                touched=now
            ):
                queued.append(batch_id)
    with transaction.atomic():
        batches_queue(queued)
        provider_batches_cancel_queue(run_ids=_runs_with_batches_to_cancel())
    return queued


def _runs_with_batches_to_cancel() -> list[int]:
    """Runs that stopped with provider batches still open and never cancelled."""
    return list(
        ProviderBatch.objects.filter(collected=False, cancel_sent__isnull=True)
        .exclude(status__in=ProviderBatch.ENDED)
        .exclude(run__status=Run.Status.RUNNING)
        .values_list("run_id", flat=True)
        .distinct()
    )
