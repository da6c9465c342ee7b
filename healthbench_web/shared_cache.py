"""A value computed once per version of its inputs, shared by every process through the cache.

`once_per_version(key, version, compute)` returns the value stored under (key, version), or
computes it. Of several processes asking for a version nobody has stored yet, one computes
(it holds a lock entry in the cache) and the others wait for its result, or, when
``stale_ok``, take at once the newest older version stored: a running run's report page
stays quick while a worker's grades move it on.

A cache that fails (Redis down) is no reason to fail the page: the value is computed here
and the failure logged; /healthz/ reports the cache itself.

`cached(key, version)` and `keep(key, version, value)` read and write the same entries for a
value computed elsewhere (a worker's, or one kept in the database).
"""

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache

log = logging.getLogger(__name__)
T = TypeVar("T")

DAY = 24 * 3600
POLL_SECONDS = 0.05


def once_per_version(
    key: str,
    version: int,
    compute: Callable[[], T],
    *,
    stale_ok: bool = False,
    timeout: int = DAY,
    lock_seconds: int = 120,
) -> T:
    exact, latest, lock = f"{key}:v{version}", f"{key}:latest", f"{key}:lock:v{version}"
    try:
        value = cache.get(exact)
        if value is not None:
            return value
        if not cache.add(lock, 1, lock_seconds):
            # Another process is computing this version.
            if stale_ok:
                older = _latest(latest, version)
                if older is not None:
                    return older
            value = _wait(exact, lock, lock_seconds)
            if value is not None:
                return value
    except Exception:
        log.warning("cache unavailable for %s: computing without it", key, exc_info=True)
        return compute()
    try:
        value = compute()
        keep(key, version, value, timeout=timeout)
        return value
    finally:
        try:
            cache.delete(lock)
        except Exception:
            log.warning("cache unavailable for %s: its lock expires by itself", key, exc_info=True)


def cached(key: str, version: int):
    """The value stored under (key, version), or None (also when the cache fails)."""
    try:
        return cache.get(f"{key}:v{version}")
    except Exception:
        log.warning("cache unavailable for %s: nothing read", key, exc_info=True)
        return None


def keep(key: str, version: int, value, *, timeout: int = DAY) -> None:
    """Store `value` under (key, version), as `once_per_version` stores what it computes."""
    try:
        cache.set(f"{key}:v{version}", value, timeout)
        # Only moves forward: a slow computation of an old version does not hide a newer one.
        newest = cache.get(f"{key}:latest")
        if newest is None or newest < version:
            cache.set(f"{key}:latest", version, timeout)
    except Exception:
        log.warning("cache unavailable for %s: the value is not kept", key, exc_info=True)


def _latest(latest: str, version: int):
    older = cache.get(latest)
    if older is None or older >= version:
        return None
    return cache.get(f"{latest.removesuffix(':latest')}:v{older}")


def _wait(exact: str, lock: str, lock_seconds: int):
    """The value another process is computing, or None when it gave up (its lock is gone)."""
    deadline = time.monotonic() + lock_seconds
    while time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        value = cache.get(exact)
        if value is not None:
            return value
        if cache.get(lock) is None:
            return cache.get(exact)
    return None
