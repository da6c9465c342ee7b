"""Batches that a release before the queue rename left on Celery's default queue.

Those releases queued every task on the queue named `celery` (CELERY_LEGACY_QUEUE); today's
workers listen on PREFIX.grading and PREFIX.sampling only, so a run in flight at the upgrade
would wait there for ever. Every worker's sweep (grading.pipeline.tasks) moves what it finds
there: each batch task goes to the queue its run belongs on now, any other task is sent again
under its name. A duplicate is harmless (a batch's claim is a conditional update).
"""

import logging

from django.conf import settings
from django.db import transaction

from grading.pipeline.runs import GRADE_BATCH_TASK, batches_queue
from healthbench_web.celery import app as celery_app

log = logging.getLogger(__name__)

MAX_PER_SWEEP = 10_000


def _task_and_args(message) -> tuple[str, list, dict]:
    payload = message.payload
    if isinstance(payload, dict):  # Celery's message protocol 1
        return payload.get("task", ""), list(payload.get("args") or []), dict(payload.get("kwargs") or {})
    args, kwargs, _embed = payload  # protocol 2: the task's name is a header
    return message.headers.get("task", ""), list(args), dict(kwargs)


def legacy_queue_drain() -> int:
    """Move the tasks waiting on the legacy queue to today's queues; returns how many."""
    moved = 0
    with celery_app.connection_for_write() as conn:
        waiting = conn.SimpleQueue(settings.CELERY_LEGACY_QUEUE)
        try:
            while moved < MAX_PER_SWEEP:
                try:
                    message = waiting.get(block=False)
                except waiting.Empty:
                    break
                name, args, kwargs = _task_and_args(message)
                if name == GRADE_BATCH_TASK and args:
                    with transaction.atomic():
                        batches_queue([int(args[0])])
                else:
                    celery_app.send_task(name, args=args, kwargs=kwargs)
                message.ack()  # only once it was sent on: a failure leaves it for the next sweep
                moved += 1
        finally:
            waiting.close()
    if moved:
        log.warning("moved %d task(s) from the legacy queue %r to today's queues", moved, settings.CELERY_LEGACY_QUEUE)
    return moved
