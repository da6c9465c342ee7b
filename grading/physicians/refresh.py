"""The background refresh of the physician quality figures: computed by a worker after a
change (queued by annotation/services/quality_refresh.py) and kept in the database and the
shared cache, so that the first page after a change serves figures instead of computing them.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import F, Q
from django.utils import timezone

from annotation.models import PhysicianQualityStore
from grading.physicians import selectors, stored


def quality_refresh() -> str:
    """Count every change made so far; store the figures unless a later refresh stored first."""
    # Cleared before reading: a change from now on queues the next refresh.
    if not PhysicianQualityStore.objects.filter(id=1).update(queued_at=None):
        PhysicianQualityStore.objects.get_or_create(id=1)
    fingerprint = selectors.fingerprint()
    row = PhysicianQualityStore.objects.filter(id=1).values_list("fingerprint", "version").first()
    if row == (fingerprint, selectors.PROGRAMME_VERSION):
        PhysicianQualityStore.objects.filter(id=1).update(requested_at=F("queued_at"))
        return "current"
    # The same figures a page computes for this fingerprint (shared through the cache).
    programme = stored.programme(fingerprint)
    counted_at = datetime.fromtimestamp(programme.counted_at, tz=UTC)
    updated = (
        PhysicianQualityStore.objects.filter(id=1)
        .filter(Q(counted_at__isnull=True) | Q(counted_at__lte=counted_at))
        .update(
            fingerprint=fingerprint,
            version=selectors.PROGRAMME_VERSION,
            counted_at=counted_at,
            figures=stored.pack(programme),
            # What is left to count: the changes made since this refresh began, if any.
            requested_at=F("queued_at"),
        )
    )
    return "stored" if updated else f"older than the stored figures ({timezone.now():%H:%M:%S})"
