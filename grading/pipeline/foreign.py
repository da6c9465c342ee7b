"""A grading message for a batch that this worker's database does not hold says so, loudly.

Two deployments on one Redis with the same CELERY_QUEUE_PREFIX (a second checkout, a staging
copy, a worker left running against another database) take each other's messages. Such a
worker finds no batch of that id, and the message is acknowledged: the batch sits `queued`
with no claim and no message anywhere (not in the queue's list, not in the `unacked` hash),
which is issue 28's item 8 (`bench/soak_bench.py --foreign-worker` shows it). A message
published again (by the reconciler, or handed on by the foreign worker) goes the same way
while the foreign worker is idle: on Redis it won every race in our runs, so publishing again
does not fix it; separate prefixes do.

So every grading message names its run (the run's `code`, in a message header that workers
of earlier releases ignore), and a worker whose database holds no batch of that id in that
run logs an error naming the cause and the setting, at most once a minute per process. A
message without the header (sent by an earlier release) is worked as before.
"""

from __future__ import annotations

import logging
import time

from django.core.exceptions import ValidationError

from grading.models import RunBatch

log = logging.getLogger(__name__)

RUN_HEADER = "healthbench_run"
LOG_EVERY_SECONDS = 60

_last_logged = 0.0


def batch_headers(run_code: object) -> dict[str, str]:
    """The headers of a grading message for a batch of the run with this code."""
    return {RUN_HEADER: str(run_code)}


def batch_is_here(*, batch_id: int, run_code: str) -> bool:
    """Whether this database holds batch `batch_id` of the run with code `run_code`."""
    try:
        return RunBatch.objects.filter(id=batch_id, run__code=run_code).exists()
    except ValidationError:  # not a UUID: not one of ours
        return False


def batch_not_here(*, batch_id: int, run_code: str, queue: str) -> str:
    """Log, at most once a minute per process, that another deployment shares this queue."""
    global _last_logged
    if time.monotonic() - _last_logged >= LOG_EVERY_SECONDS:
        _last_logged = time.monotonic()
        log.error(
            "batch %d of run %s is not in this worker's database: a worker of another deployment takes from the "
            "same queue (%s), and that run's batches wait until a worker of its own database gets their "
            "messages. Give each deployment that shares a Redis its own CELERY_QUEUE_PREFIX",
            batch_id,
            run_code,
            queue,
            extra={"batch": batch_id},
        )
    return "not in this database"
