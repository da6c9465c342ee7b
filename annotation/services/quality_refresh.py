"""The physician quality figures are computed by a worker after a change, not by the next page.

Every service that saves something the figures count (an answer, a can't-judge, an event of a
done task, a removal, labels moved or imported) calls `quality_changed()` in its transaction.
It notes the first change the stored figures do not count yet (`requested_at`) and, when no
refresh is queued, queues one (`queued_at`) once the transaction commits, to run
PHYSICIAN_QUALITY_REFRESH_SECONDS later: one refresh counts every change made meanwhile. The
state is one row of the database (`PhysicianQualityStore`), so web processes and workers see
the same on SQLite with a process-local cache too, and a Redis outage loses none of it.

The refresh (grading/physicians/refresh.py) clears `queued_at` before it reads, so a change
made while it computes queues the next one; when it stores the figures, `requested_at`
becomes the first change made since it began (or nothing). A refresh that never runs (a
worker down, a lost message) is queued again by the first change after
PHYSICIAN_QUALITY_UPDATING_SECONDS, by which time the pages compute the figures themselves
(grading/physicians/stored.py); a refresh that cannot be queued clears both marks at once.
"""

import logging
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import PhysicianQualityStore
from healthbench_web.celery import app as celery_app

log = logging.getLogger(__name__)

QUALITY_REFRESH_TASK = "grading.tasks.physician_quality_refresh"
BROKER_SECONDS = 1.0


def quality_changed() -> None:
    """Something the figures count is being saved in this transaction (see above)."""
    now = timezone.now()
    lost = now - timedelta(seconds=settings.PHYSICIAN_QUALITY_UPDATING_SECONDS)
    # A plain conditional UPDATE: while a refresh is queued (the common case under steady
    # labeling) it matches no row and takes no lock, so answers never wait on one another here.
    marked = (
        PhysicianQualityStore.objects.filter(id=1)
        .filter(Q(queued_at__isnull=True) | Q(queued_at__lt=lost))
        .update(queued_at=now, requested_at=Coalesce(F("requested_at"), Value(now)))
    )
    if not marked:
        # No row yet (a new database): the first change makes it; otherwise a refresh is queued.
        marked = _first_row(now)
    if marked:
        transaction.on_commit(partial(_send, now))


def _first_row(now) -> int:
    table = connection.ops.quote_name(PhysicianQualityStore._meta.db_table)
    adapt = connection.ops.adapt_datetimefield_value
    # The table name comes from the model; values travel apart (S608).
    statement = f"INSERT INTO {table} (id, requested_at, queued_at) VALUES (1, %s, %s) ON CONFLICT (id) DO NOTHING"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(statement, [adapt(now), adapt(now)])
        return cursor.rowcount


def _send(queued_at) -> None:
    task = celery_app.tasks.get(QUALITY_REFRESH_TASK)
    try:
        if task is None:  # a process that has not loaded grading's tasks
            raise LookupError(f"no task {QUALITY_REFRESH_TASK}")
        # One attempt within a second: a broker outage must not hold up the physician's answer
        # (Celery's own connection would retry for seconds).
        with celery_app.connection_for_write(connect_timeout=BROKER_SECONDS) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_SECONDS)
            task.apply_async(countdown=settings.PHYSICIAN_QUALITY_REFRESH_SECONDS, retry=False, connection=conn)
    except Exception as exc:
        log.warning("could not queue the physician quality refresh: %s: %s", type(exc).__name__, exc)
        # Nothing is coming: the pages must not say "updating", and compute the figures
        # themselves; the next change tries to queue again.
        PhysicianQualityStore.objects.filter(id=1, queued_at=queued_at).update(queued_at=None, requested_at=None)
