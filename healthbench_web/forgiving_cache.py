"""A Redis cache that treats an unreachable Redis as an empty cache.

Everything kept in the default cache can be computed again (reports, meta-eval results, the
"already logged" marks of failures), so a Redis outage should cost time, not pages: a read
that fails is a miss, a write that fails is skipped, and a warning at most every half minute
says so. /healthz/ and the API limits use the "strict" alias instead (the same Redis, errors
raised), because they must see the outage.
"""

import logging
import time
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 30
ERRORS = (RedisError, OSError)


class ForgivingRedisCache(RedisCache):
    _warned_at = 0.0

    def _failed(self, operation: str, exc: Exception) -> None:
        now = time.monotonic()
        if now - ForgivingRedisCache._warned_at >= WARN_EVERY_SECONDS:
            ForgivingRedisCache._warned_at = now
            log.warning("cache unavailable (%s: %s): %s treated as a miss", type(exc).__name__, exc, operation)

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        try:
            return super().get(key, default, version)
        except ERRORS as exc:
            self._failed("get", exc)
            return default

    def get_many(self, keys: Any, version: int | None = None) -> dict[Any, Any]:
        try:
            return super().get_many(keys, version)
        except ERRORS as exc:
            self._failed("get_many", exc)
            return {}

    def has_key(self, key: Any, version: int | None = None) -> bool:
        try:
            return super().has_key(key, version)
        except ERRORS as exc:
            self._failed("has_key", exc)
            return False

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        try:
            return super().add(key, value, timeout, version)
        except ERRORS as exc:
            self._failed("add", exc)
            return False

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        try:
            super().set(key, value, timeout, version)
        except ERRORS as exc:
            self._failed("set", exc)

    def set_many(self, data: dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list:
        try:
            return super().set_many(data, timeout, version)
        except ERRORS as exc:
            self._failed("set_many", exc)
            return list(data)  # the keys that were not stored

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        try:
            return super().touch(key, timeout, version)
        except ERRORS as exc:
            self._failed("touch", exc)
            return False

    def delete(self, key: Any, version: int | None = None) -> bool:
        try:
            return super().delete(key, version)
        except ERRORS as exc:
            self._failed("delete", exc)
            return False

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        try:
            super().delete_many(keys, version)
        except ERRORS as exc:
            self._failed("delete_many", exc)
