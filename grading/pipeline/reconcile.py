"""The reconciler: a batch that waits without a message is published again.

A batch lives in the database; its message only says "claim it now". When the two part ways,
the batch waits for ever: a Redis outage swallows the publish of a batch handed back (it stays
`queued` with a claim and no lease, and no message anywhere), or a message is lost with the
worker that held it. So every worker's sweep (grading.pipeline.tasks) calls
`batches_reconcile`, which publishes again, once per GRADING_RECONCILE_SECONDS at most:

a `queued` batch of a running run, claimed before or not, untouched for longer than
GRADING_RECONCILE_SECONDS, whose id is in no live message of the broker: none in the queues'
lists, and none that a worker holds waiting for its countdown. A message a worker holds
without a countdown for a batch still queued is not live: the worker took it and has not run
it (every pool process busy with a long batch), so another worker may as well. A claimed
batch without a lease is such a batch: a hand-back clears the lease and queues it, and the
database refuses a `running` batch without one (`running_batch_has_lease`);
a running batch whose lease ran out is the lease sweep's (grading.pipeline.runs.runs_sweep).

On a broker whose messages cannot be read (the filesystem broker; Redis answering oddly)
every such batch is published again. A duplicate message is harmless: the claim is a
conditional update (grading.pipeline.batches.batch_claim), so only one message's task works,
and the other ends "not claimed". A batched run's batch waiting on its provider is left to
the sweep's own poll rule (grading.pipeline.runs.runs_sweep).
"""

from __future__ import annotations

import ast
import base64
import json
import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from grading.models import Run, RunBatch
from grading.pipeline.runs import GRADE_BATCH_TASK, batches_queue
from healthbench_web.celery import app as celery_app

log = logging.getLogger(__name__)

# Messages read per queue at most: a queue longer than this is no lost message's doing.
MAX_MESSAGES_READ = 50_000


def batches_reconcile() -> list[int]:
    """Publish again the batches that wait without a message (see the module); their ids."""
    now = timezone.now()
    quiet = now - timedelta(seconds=settings.GRADING_RECONCILE_SECONDS)
    open_run = Q(run__status=Run.Status.RUNNING)
    waiting_on_provider = Q(run__batch=True, live=False)
    stale = list(
        RunBatch.objects.filter(open_run, status=RunBatch.Status.QUEUED, touched__lt=quiet)
        .exclude(waiting_on_provider)
        .values_list("id", flat=True)
    )
    if not stale:
        return []
    live = batches_with_messages()
    again = []
    for batch_id in stale:
        if live is not None and batch_id in live:
            continue
        # Touched, so that overlapping sweeps of several workers publish it once per period.
        if RunBatch.objects.filter(id=batch_id, status=RunBatch.Status.QUEUED, touched__lt=quiet).update(touched=now):
            again.append(batch_id)
    if again:
        with transaction.atomic():
            batches_queue(again)
        log.warning(
            "reconciler: %d batch(es) waited %d s without a message and were published again: %s",
            len(again),
            settings.GRADING_RECONCILE_SECONDS,
            again,
            extra={"batches": again},
        )
    return again


def batches_with_messages() -> set[int] | None:
    """Ids of the batches that have a grading message in the broker, queued or held by a
    worker; None when the broker's messages cannot be read (then every batch counts as lost)."""
    if not celery_app.conf.broker_url.startswith(("redis://", "rediss://")):
        return None
    try:
        with celery_app.connection_for_read() as connection:
            channel = connection.default_channel
            client = channel.client
            raw: list[bytes] = []
            for queue in (settings.CELERY_GRADING_QUEUE, settings.CELERY_SAMPLING_QUEUE):
                for priority in channel.priority_steps:
                    raw += client.lrange(channel._q_for_pri(queue, priority), 0, MAX_MESSAGES_READ)
            held = [json.loads(value)[0] for value in client.hvals(channel.unacked_key)]
            held = [message for message in held if _waits_for_countdown(message)]
    except Exception as exc:
        log.warning("reconciler: the broker's messages could not be read (%s: %s)", type(exc).__name__, exc)
        return None
    found: set[int] = set()
    for message in [json.loads(value) for value in raw] + held:
        batch_id = _batch_of(message)
        if batch_id is not None:
            found.add(batch_id)
    return found


def _waits_for_countdown(message: object) -> bool:
    """A message a worker holds until its ETA, which is still to come."""
    headers = message.get("headers") if isinstance(message, dict) else None
    eta = headers.get("eta") if isinstance(headers, dict) else None
    if not isinstance(eta, str):
        return False
    try:
        when = datetime.fromisoformat(eta)
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when > timezone.now()


def _batch_of(message: object) -> int | None:
    """The batch id a grade_batch message carries, or None for any other message."""
    if not isinstance(message, dict):
        return None
    headers = message.get("headers") or {}
    if not isinstance(headers, dict) or headers.get("task") != GRADE_BATCH_TASK:
        return None
    try:
        args = ast.literal_eval(str(headers.get("argsrepr")))
    except (ValueError, SyntaxError):
        args = None
    if not isinstance(args, tuple) or not args:
        try:
            body = message.get("body", "")
            decoded = base64.b64decode(body) if message.get("properties", {}).get("body_encoding") == "base64" else body
            args = tuple(json.loads(decoded)[0])
        except (ValueError, TypeError, IndexError, AttributeError):
            return None
    return args[0] if args and isinstance(args[0], int) else None
