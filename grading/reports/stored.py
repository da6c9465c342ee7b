"""A finished run's numbers kept in the database (StoredReport), behind the shared cache.

The cache is fast but forgets (a flush, a restart, Redis down). A run that ended never changes
its numbers again, so its report and meta-eval documents are written to the database the first
time they are computed (by the worker's warm task when the run ends, or by the first reader),
and every later cache miss, on any process, reads them back in a few milliseconds instead of
computing them again. A stored row holds the run's report_version: a resume moves that on, and
the row is then computed and written anew.
"""

import hashlib
import io
import json
import logging
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction

from grading.models import Run, StoredReport

log = logging.getLogger(__name__)

RANKING = ("ranked_response_ids", "ranked_scores", "ranked_status_codes")


def document_version(name: str, builder: int, schema: tuple[str, ...]) -> str:
    """A stored document's version, from what builds it: the builder's own version (raised by
    hand when a value is computed differently) and a hash of the document's keys (so a new key,
    a new metric, gives a new version by itself). It starts the document's key, so a finished
    run's document of an older shape is never read back: it is computed anew."""
    digest = hashlib.sha256("\n".join(schema).encode()).hexdigest()[:8]
    return f"{name}:v{builder}.{digest}"


def document_keys(document: dict, nested: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The keys of `document` as a schema names them: its own, and `parent.key` for the keys
    of each parent in `nested`, sorted."""
    keys = set(document)
    for parent in nested:
        keys |= {f"{parent}.{key}" for key in document[parent]}
    return tuple(sorted(keys))


def _read(run: Run, kind: str, key: str) -> bytes | None:
    row = StoredReport.objects.filter(run=run, kind=kind, key=key, version=run.report_version).values_list(
        "payload", flat=True
    )
    payload = row.first()
    return None if payload is None else zlib.decompress(bytes(payload))


def _write(run: Run, kind: str, key: str, payload: bytes) -> None:
    # Stored at the version read with the run: a resume that moved it on since makes this row
    # stale at once, never wrong.
    packed = zlib.compress(payload, 6)
    try:
        with transaction.atomic():
            updated = StoredReport.objects.filter(run=run, kind=kind, key=key).update(
                version=run.report_version, payload=packed
            )
            if not updated:
                StoredReport.objects.create(run=run, kind=kind, key=key, version=run.report_version, payload=packed)
    except IntegrityError:
        # Another process stored the same numbers a moment before: theirs will do.
        log.info("stored report of %s (%s) written by another process first", run.name, kind)


def stored(run: Run, kind: str, key: str, compute: Callable[[], Any], encode, decode) -> Any:
    """The stored value of a finished run, or `compute()` stored now; a running run's value is
    only computed (it moves at every progress step)."""
    if run.is_active:
        return compute()
    payload = _read(run, kind, key)
    if payload is not None:
        return decode(payload)
    value = compute()
    _write(run, kind, key, encode(value))
    return value


def encode_json(document: dict) -> bytes:
    return json.dumps(document).encode()


def decode_json(payload: bytes) -> dict:
    return json.loads(payload)


def encode_arrays(document: dict, arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    named: dict[str, Any] = {"document": np.frombuffer(encode_json(document), dtype=np.uint8), **arrays}
    np.savez(buffer, **named)
    return buffer.getvalue()


def decode_arrays(payload: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    document = decode_json(arrays.pop("document").tobytes())
    return document, arrays
