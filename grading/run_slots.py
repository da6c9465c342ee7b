"""A run's concurrency bound, shared by every task of the run on every worker.

A task asks for as many slots as it has work for and gets what is free (possibly none); each
slot is one grader call in flight. It gives a slot back as soon as it has no more work for
it, so a task finishing its batch hands its slots to the run's other tasks.

With Redis the slots are counted there per holder (one task), with an expiry the holder
renews while it works: the slots of a worker that was killed come free by themselves after
GRADING_LEASE_SECONDS, when its batches are queued again too. Without Redis a process counts
the slots of its own tasks only, so the bound holds per worker process.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING

from django.conf import settings

from grading.rate_limit import redis_for_loop

if TYPE_CHECKING:
    from redis.asyncio import Redis


# KEYS[1]: hash holder -> slots held; KEYS[2]: sorted set holder -> expiry.
# ARGV: holder, slots wanted, limit, ttl. Returns the slots granted (0..wanted).
_ACQUIRE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1e6
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, holder in ipairs(dead) do redis.call('HDEL', KEYS[1], holder) end
if #dead > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
local used = 0
for _, n in ipairs(redis.call('HVALS', KEYS[1])) do used = used + tonumber(n) end
local grant = math.min(tonumber(ARGV[2]), tonumber(ARGV[3]) - used)
if grant <= 0 then return 0 end
redis.call('HINCRBY', KEYS[1], ARGV[1], grant)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[1])
redis.call('EXPIRE', KEYS[1], 86400)
redis.call('EXPIRE', KEYS[2], 86400)
return grant
"""

# ARGV: holder, slots given back.
_RELEASE = """
local left = redis.call('HINCRBY', KEYS[1], ARGV[1], -tonumber(ARGV[2]))
if left <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return left
"""

# ARGV: holder, ttl. Renews the expiry of a holder that still holds slots.
_REFRESH = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local now_parts = redis.call('TIME')
  local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1e6
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
end
return 0
"""


class RedisSlots:
    def __init__(self, redis: Redis, key: str, limit: int, *, ttl: float):
        self.keys = [key, key + ":expiry"]
        self.limit = limit
        self.ttl = ttl
        self.refresh_seconds = ttl / 3
        self.holder = uuid.uuid4().hex
        self._acquire = redis.register_script(_ACQUIRE)
        self._release = redis.register_script(_RELEASE)
        self._refresh = redis.register_script(_REFRESH)

    async def acquire(self, wanted: int) -> int:
        return int(await self._acquire(keys=self.keys, args=[self.holder, wanted, self.limit, self.ttl]))

    async def release(self, n: int = 1) -> None:
        await self._release(keys=self.keys, args=[self.holder, n])

    async def refresh(self) -> None:
        await self._refresh(keys=self.keys, args=[self.holder, self.ttl])


class LocalSlots:
    """Slots counted in this process; all of a process's tasks share one counter per run."""

    _used: dict[str, int] = {}
    _lock = threading.Lock()
    refresh_seconds = 3600.0  # nothing to renew

    def __init__(self, key: str, limit: int):
        self.key = key
        self.limit = limit

    async def acquire(self, wanted: int) -> int:
        with self._lock:
            used = self._used.get(self.key, 0)
            grant = max(0, min(wanted, self.limit - used))
            self._used[self.key] = used + grant
            return grant

    async def release(self, n: int = 1) -> None:
        with self._lock:
            self._used[self.key] = max(0, self._used.get(self.key, 0) - n)

    async def refresh(self) -> None:
        pass


def slots_for_run(run_id: int, limit: int) -> RedisSlots | LocalSlots:
    """The slots of a run; call inside the event loop. Keys name the database, so that runs
    of two databases sharing one Redis (a test beside a development server) stay apart."""
    key = f"hb:{settings.DATABASES['default']['NAME']}:run:{run_id}:slots"
    redis = redis_for_loop()
    if redis is None:
        return LocalSlots(key, limit)
    return RedisSlots(redis, key, limit, ttl=settings.GRADING_LEASE_SECONDS)
