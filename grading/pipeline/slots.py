"""A run's concurrency bound, shared by every task of the run on every worker.

A slot is one grader call in flight. A task (a holder) asks for as many slots as it has
work for, and is granted what is free. While another holder waits for slots, each holder
is capped at its fair share (the bound divided among the holders) and one above it gives
slots back as its calls return; while nobody waits, a holder may take all that is free. So
a run's calls spread over every worker process working on it, instead of piling into
whichever task came first, and the slots of a task running out of work go to the others
at once.

With Redis the slots are counted there per holder, with an expiry that each request for
slots renews: the slots of a worker that was killed come free by themselves after
GRADING_LEASE_SECONDS, when its batches are queued again too. Without Redis a process counts
the slots of its own tasks only, so the bound holds per worker process.
"""

from __future__ import annotations

import math
import threading
import uuid
from typing import TYPE_CHECKING

from django.conf import settings

from grading.pipeline.rate_limit import redis_for_loop

if TYPE_CHECKING:
    from redis.asyncio import Redis

# KEYS[1]: hash holder -> slots held; KEYS[2]: sorted set holder -> expiry; KEYS[3]: hash
# holder -> slots wanted but not granted. ARGV: holder, slots wanted, limit, ttl, slots given
# back. Returns {slots granted (0..wanted), the most this holder should hold}.
_ACQUIRE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1e6
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, holder in ipairs(dead) do
  redis.call('HDEL', KEYS[1], holder)
  redis.call('HDEL', KEYS[3], holder)
end
if #dead > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[1])
local limit, wanted = tonumber(ARGV[3]), tonumber(ARGV[2])
local held = math.max(0, tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') - tonumber(ARGV[5]))
redis.call('HSET', KEYS[1], ARGV[1], held)
local used = 0
for _, n in ipairs(redis.call('HVALS', KEYS[1])) do used = used + tonumber(n) end
local contended = false
local waiting = redis.call('HGETALL', KEYS[3])
for i = 1, #waiting, 2 do
  if waiting[i] ~= ARGV[1] and tonumber(waiting[i + 1]) > 0 then contended = true end
end
local cap = limit
if contended then cap = math.ceil(limit / redis.call('ZCARD', KEYS[2])) end
local grant = math.max(0, math.min(wanted, limit - used, cap - held))
redis.call('HSET', KEYS[1], ARGV[1], held + grant)
redis.call('HSET', KEYS[3], ARGV[1], wanted - grant)
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], 86400) end
return {grant, cap}
"""

# ARGV: holder. The holder leaves, with whatever it still holds.
_CLOSE = """
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 0
"""


class RedisSlots:
    def __init__(self, redis: Redis, key: str, limit: int, *, ttl: float):
        self.keys = [key, key + ":expiry", key + ":waiting"]
        self.limit = limit
        self.ttl = ttl
        self.holder = uuid.uuid4().hex
        self._acquire = redis.register_script(_ACQUIRE)
        self._close = redis.register_script(_CLOSE)

    async def acquire(self, wanted: int, released: int = 0) -> tuple[int, int]:
        """Give back `released` slots and ask for `wanted` more: (granted, the most to hold
        now). Also renews this holder's expiry: call it more often than ttl."""
        granted, cap = await self._acquire(keys=self.keys, args=[self.holder, wanted, self.limit, self.ttl, released])
        return int(granted), int(cap)

    async def close(self) -> None:
        await self._close(keys=self.keys, args=[self.holder])


class LocalSlots:
    """The same, counted in this process: all of a process's tasks share one table per run."""

    _tables: dict[str, dict[str, list[int]]] = {}  # run key -> holder -> [held, waiting]
    _lock = threading.Lock()

    def __init__(self, key: str, limit: int):
        self.key = key
        self.limit = limit
        self.holder = uuid.uuid4().hex

    async def acquire(self, wanted: int, released: int = 0) -> tuple[int, int]:
        with self._lock:
            table = self._tables.setdefault(self.key, {})
            mine = table.setdefault(self.holder, [0, 0])
            mine[0] = max(0, mine[0] - released)
            contended = any(waiting > 0 for holder, (_, waiting) in table.items() if holder != self.holder)
            cap = math.ceil(self.limit / len(table)) if contended else self.limit
            used = sum(held for held, _ in table.values())
            grant = max(0, min(wanted, self.limit - used, cap - mine[0]))
            mine[0] += grant
            mine[1] = wanted - grant
            return grant, cap

    async def close(self) -> None:
        with self._lock:
            table = self._tables.get(self.key, {})
            table.pop(self.holder, None)
            if not table:
                self._tables.pop(self.key, None)


def slots_for_run(run_id: int, limit: int) -> RedisSlots | LocalSlots:
    """The slots of a run; call inside the event loop. Keys name the database, so that runs
    of two databases sharing one Redis (a test beside a development server) stay apart."""
    key = f"hb:{settings.DATABASES['default']['NAME']}:run:{run_id}:slots"
    redis = redis_for_loop()
    if redis is None:
        return LocalSlots(key, limit)
    return RedisSlots(redis, key, limit, ttl=settings.GRADING_LEASE_SECONDS)
