"""Celery tasks of grading runs: thin, taking ids, calling grading services.

Settings acknowledge a task only after it ran and give it back when its worker dies
(acks late, reject on worker lost); the tasks are idempotent, so a redelivery costs at
most a claim that fails. Recovery does not rely on the broker alone: the filesystem broker
drops the messages a killed worker held, and Redis returns them only after its visibility
timeout. So every worker also sweeps, every GRADING_SWEEP_SECONDS, for batches whose lease
ran out and queues them again (grading.pipeline.runs.runs_sweep), publishes again the batches
that wait without a message (grading.pipeline.reconcile), and moves the tasks an older release
left on Celery's default queue (grading.pipeline.legacy_queue).
"""

import logging

from celery import Task, bootsteps, shared_task
from django.conf import settings
from django.db import close_old_connections

from annotation.services.quality_refresh import QUALITY_REFRESH_TASK
from grading.drift import rubric_drift_stored
from grading.metaeval.report import run_meta_eval_report_cached
from grading.models import Run
from grading.physicians.refresh import quality_refresh
from grading.pipeline.batches import batch_run
from grading.pipeline.foreign import RUN_HEADER, batch_is_here, batch_not_here
from grading.pipeline.legacy_queue import legacy_queue_drain
from grading.pipeline.provider_batches import provider_batches_cancel
from grading.pipeline.reconcile import batches_reconcile
from grading.pipeline.runs import CANCEL_PROVIDER_BATCHES_TASK, GRADE_BATCH_TASK, WARM_REPORT_TASK, runs_sweep
from grading.reports.report import run_report_data_cached
from healthbench_web.celery import app

log = logging.getLogger(__name__)


@shared_task(name=GRADE_BATCH_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def grade_batch(self: Task, batch_id: int) -> str:
    """Claim one batch of a run and do what is missing of it (see grading.pipeline.batches);
    a message for a batch this database does not hold is logged as another deployment's
    (grading.pipeline.foreign)."""
    run_code = self.request.get(RUN_HEADER)
    if run_code and not batch_is_here(batch_id=batch_id, run_code=str(run_code)):
        queue = (self.request.delivery_info or {}).get("routing_key") or settings.CELERY_GRADING_QUEUE
        return batch_not_here(batch_id=batch_id, run_code=str(run_code), queue=queue)
    return str(batch_run(batch_id=batch_id))


@shared_task(
    name=CANCEL_PROVIDER_BATCHES_TASK,
    acks_late=True,
    ignore_result=True,
    autoretry_for=(Exception,),
    retry_backoff=True,
    max_retries=5,
)
def cancel_provider_batches(run_id: int) -> int:
    """Cancel a stopped run's open batches at the provider (grading.pipeline.provider_batches)."""
    return provider_batches_cancel(run_id=run_id)


@shared_task(name=WARM_REPORT_TASK, ignore_result=True)
def warm_report(run_id: int) -> None:
    """Compute an ended run's report and meta-eval into the database and the shared cache (a
    no-op when they are there already): the whole report for the page, its document for the
    downloads and the API, the meta-eval document and the page's drift notice."""
    run = Run.objects.filter(id=run_id).first()
    if run is not None:
        run_report_data_cached(run=run)
        run_meta_eval_report_cached(run=run)
        if not run.is_active:
            rubric_drift_stored(run)  # its page's drift notice, read from the grades once


@shared_task(name=QUALITY_REFRESH_TASK, ignore_result=True)
def physician_quality_refresh() -> str:
    """Compute the physician quality figures after a change and keep them for the pages
    (grading.physicians.refresh); queued by the services that save what they count."""
    return quality_refresh()


def sweep() -> None:
    close_old_connections()
    try:
        queued = runs_sweep()
    except Exception:
        # The next sweep tries again; a worker must not die of a database hiccup here.
        log.exception("grading sweep failed")
        return
    if queued:
        log.warning("grading sweep queued %d batch(es) again: %s", len(queued), queued)
    try:
        batches_reconcile()
    except Exception:
        log.exception("the reconciler failed; the next sweep tries again")
    try:
        legacy_queue_drain()
    except Exception:
        log.exception("moving tasks off the legacy queue failed; the next sweep tries again")


class GradingSweep(bootsteps.StartStopStep):
    """Runs sweep() on the worker's timer, in the worker's main process."""

    requires = {"celery.worker.components:Timer"}

    def start(self, worker) -> None:
        self.tref = worker.timer.call_repeatedly(settings.GRADING_SWEEP_SECONDS, sweep, priority=10)

    def stop(self, worker) -> None:
        if getattr(self, "tref", None) is not None:
            self.tref.cancel()


app.steps["worker"].add(GradingSweep)
