"""The physician quality figures a page serves: current ones from the cache, the copy a worker
kept in the database (grading/physicians/refresh.py), or, when a change is still being
counted, that copy with the time of the first change it does not count.

A page never computes the figures while a refresh is on its way: after a change the worker
computes them (annotation/services/quality_refresh.py queues it), and until it has, the pages
serve the last figures saying so. They compute the figures themselves only when nothing is
stored, when a change reached the database by a way that queued nothing (the admin, a shell),
or when the refresh has not come within PHYSICIAN_QUALITY_UPDATING_SECONDS (a worker down or
busy): what they then show is current, never older figures in silence.

The database keeps the figures as one .npz: the arrays as they are, the dicts as JSON text
(Python's float repr reads back to the same double), so the figures served from it equal the
computed ones to the bit (tests/test_physician_quality_refresh.py).
"""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from django.conf import settings
from django.utils import timezone

from annotation.models import PhysicianQualityStore
from grading.metaeval.agreement import MetaEvalLabels
from grading.physicians import selectors
from grading.physicians.selectors import PROGRAMME_VERSION, Labels, Programme, TaskTimes
from healthbench_web.shared_cache import cached, keep, once_per_version


@dataclass(frozen=True)
class Served:
    programme: Programme
    # The first change the figures do not count yet, while a refresh is on its way; None when
    # they are current.
    updating_since: datetime | None = None

    @property
    def counted_at(self) -> datetime:
        return datetime.fromtimestamp(self.programme.counted_at, tz=UTC)


def programme_served() -> Served:
    """The figures for a page: current, or the last stored while a refresh counts newer work."""
    fingerprint = selectors.fingerprint()
    current = cached(selectors.programme_key(fingerprint), PROGRAMME_VERSION)
    if current is not None:
        return Served(current)
    row = (
        PhysicianQualityStore.objects.filter(id=1, version=PROGRAMME_VERSION, figures__isnull=False)
        .values_list("fingerprint", "requested_at")
        .first()
    )
    if row is not None:
        stored_fingerprint, requested_at = row
        if stored_fingerprint != fingerprint and _updating(requested_at):
            kept = stored_programme(stored_fingerprint)
            if kept is not None:
                return Served(kept, updating_since=requested_at)
    return Served(programme(fingerprint))


def _updating(requested_at: datetime | None) -> bool:
    if requested_at is None:
        return False
    return timezone.now() - requested_at < timedelta(seconds=settings.PHYSICIAN_QUALITY_UPDATING_SECONDS)


def programme(fingerprint: str | None = None) -> Programme:
    """The current figures: from the cache, the stored copy when it counts exactly this, or
    computed here (once per change, shared through the cache)."""
    fingerprint = fingerprint or selectors.fingerprint()

    def compute() -> Programme:
        return stored_programme(fingerprint) or selectors.programme_computed()

    return once_per_version(selectors.programme_key(fingerprint), PROGRAMME_VERSION, compute)


def stored_programme(fingerprint: str) -> Programme | None:
    """The figures stored under `fingerprint` (from the cache when read before), or None."""
    key = selectors.programme_key(fingerprint)
    value = cached(key, PROGRAMME_VERSION)
    if value is not None:
        return value
    blob = (
        PhysicianQualityStore.objects.filter(id=1, version=PROGRAMME_VERSION, fingerprint=fingerprint)
        .values_list("figures", flat=True)
        .first()
    )
    if blob is None:
        return None
    value = unpack(bytes(blob))
    keep(key, PROGRAMME_VERSION, value)
    return value


def pack(programme: Programme) -> bytes:
    """The figures and their arrays as one .npz (no pickle)."""
    labels, times = programme.labels, programme.times
    kinds, kind_codes = np.unique(times.kind.astype(str), return_inverse=True)
    figures = {
        "agreement": list(programme.agreement.items()),
        "label_seconds": list(programme.label_seconds.items()),
        "cant_judge": list(programme.cant_judge.items()),
        "reasons": [(p, list(c.items())) for p, c in programme.reasons.items()],
        "flags": list(programme.flags.items()),
        "removed": sorted(programme.removed),
        "counted_at": programme.counted_at,
        "category_names": list(labels.labels.category_names),
        "physician_ids": list(labels.labels.physician_ids),
        "n_items": labels.labels.n_items,
        "kinds": kinds.tolist(),
    }
    text = json.dumps(figures).encode()
    out = io.BytesIO()
    np.savez_compressed(
        out,
        figures=np.frombuffer(text, dtype=np.uint8),
        item=labels.labels.item,
        category=labels.labels.category,
        physician=labels.labels.physician,
        label=labels.labels.label,
        physician_pk=labels.physician_pk,
        response_id=labels.response_id,
        criterion_id=labels.criterion_id,
        task_physician=times.physician_id,
        task_kind=kind_codes.reshape(-1),
        completed=times.completed,
        seconds=times.seconds,
        timed=times.timed,
    )
    return out.getvalue()


def unpack(blob: bytes) -> Programme:
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        a = {name: npz[name] for name in npz.files}
    f = json.loads(a["figures"].tobytes())
    labels = Labels(
        MetaEvalLabels(
            item=a["item"],
            category=a["category"],
            physician=a["physician"],
            label=a["label"],
            category_names=tuple(f["category_names"]),
            physician_ids=tuple(f["physician_ids"]),
            n_items=f["n_items"],
        ),
        a["physician_pk"],
        a["response_id"],
        a["criterion_id"],
    )
    kinds = np.array(f["kinds"] or [""], dtype=object)
    times = TaskTimes(a["task_physician"], kinds[a["task_kind"]], a["completed"], a["seconds"], a["timed"])
    return Programme(
        agreement=dict(f["agreement"]),
        label_seconds=dict(f["label_seconds"]),
        cant_judge=dict(f["cant_judge"]),
        reasons={p: Counter(dict(pairs)) for p, pairs in f["reasons"]},
        flags=dict(f["flags"]),
        labels=labels,
        times=times,
        removed=set(f["removed"]),
        counted_at=f["counted_at"],
    )
