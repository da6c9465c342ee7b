"""Requests and tokens per minute per endpoint, kept by all workers together.

A token bucket per limit: it refills at limit/60 per second and holds at most
``BURST_SECONDS`` worth, so a fresh run cannot fire a whole minute's quota in its first
second (providers enforce their limits over short windows too). A request takes one request
and its estimated tokens; when the endpoint reports the real count, the difference is settled
(a refund can make room, an overrun leaves a debt that later requests wait out).

With Redis configured the buckets live there, updated by one Lua script per request, on the
Redis clock, so every worker on every machine draws from the same bucket. Without Redis each
worker process keeps its own buckets: the limits then hold per process, not in total.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import weakref
from typing import TYPE_CHECKING, Protocol

from django.conf import settings

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from grading.pipeline.endpoint import CallTarget

BURST_SECONDS = 6.0
KEY_TTL_SECONDS = 600

# KEYS[1]: the bucket hash. ARGV: requests per minute, tokens per minute, token cost,
# burst seconds (0 for a limit means none). Returns "0" when the request may go, else the
# seconds to wait before asking again (as a string: Lua numbers come back as integers).
_ACQUIRE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1e6
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local cost, burst = tonumber(ARGV[3]), tonumber(ARGV[4])
local cap_r, cap_t = math.max(1, rpm * burst / 60), math.max(1, tpm * burst / 60)
local state = redis.call('HMGET', KEYS[1], 'r', 't', 'ts')
local r = tonumber(state[1]) or cap_r
local t = tonumber(state[2]) or cap_t
local elapsed = math.max(0, now - (tonumber(state[3]) or now))
r = math.min(cap_r, r + elapsed * rpm / 60)
t = math.min(cap_t, t + elapsed * tpm / 60)
local wait = 0
if rpm > 0 and r < 1 then wait = math.max(wait, (1 - r) * 60 / rpm) end
-- A request larger than the whole bucket waits for a full bucket, then leaves a debt.
local need = math.min(cost, cap_t)
if tpm > 0 and t < need then wait = math.max(wait, (need - t) * 60 / tpm) end
if wait == 0 then
  if rpm > 0 then r = r - 1 end
  if tpm > 0 then t = t - cost end
end
redis.call('HSET', KEYS[1], 'r', tostring(r), 't', tostring(t), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
return tostring(wait)
"""


class RateLimiter(Protocol):
    async def acquire(self, endpoint: CallTarget, tokens: int) -> None: ...

    async def settle(self, endpoint: CallTarget, delta: int) -> None: ...


def _limited(endpoint: CallTarget) -> bool:
    return bool(endpoint.requests_per_minute or endpoint.tokens_per_minute)


class LocalRateLimiter:
    """The same buckets inside one process (no Redis)."""

    def __init__(self, *, burst_seconds: float = BURST_SECONDS, clock=time.monotonic):
        self.burst_seconds = burst_seconds
        self.clock = clock
        self.lock = threading.Lock()
        self.buckets: dict[str, list[float]] = {}  # key -> [requests, tokens, last refill]

    def take(self, endpoint: CallTarget, tokens: int) -> float:
        """Take from the buckets and return 0, or return how long to wait."""
        rpm, tpm = endpoint.requests_per_minute or 0, endpoint.tokens_per_minute or 0
        cap_r, cap_t = max(1.0, rpm * self.burst_seconds / 60), max(1.0, tpm * self.burst_seconds / 60)
        with self.lock:
            now = self.clock()
            r, t, last = self.buckets.get(endpoint.limit_key, (cap_r, cap_t, now))
            r = min(cap_r, r + (now - last) * rpm / 60)
            t = min(cap_t, t + (now - last) * tpm / 60)
            wait = 0.0
            if rpm and r < 1:
                wait = max(wait, (1 - r) * 60 / rpm)
            need = min(tokens, cap_t)
            if tpm and t < need:
                wait = max(wait, (need - t) * 60 / tpm)
            if wait == 0:
                r, t = r - (1 if rpm else 0), t - (tokens if tpm else 0)
            self.buckets[endpoint.limit_key] = [r, t, now]
            return wait

    async def acquire(self, endpoint: CallTarget, tokens: int) -> None:
        if not _limited(endpoint):
            return
        while (wait := self.take(endpoint, tokens)) > 0:
            await asyncio.sleep(wait * random.uniform(1.0, 1.1))  # noqa: S311 - jitter, not a secret

    async def settle(self, endpoint: CallTarget, delta: int) -> None:
        if not endpoint.tokens_per_minute or not delta:
            return
        with self.lock:
            bucket = self.buckets.get(endpoint.limit_key)
            if bucket is not None:
                bucket[1] -= delta


class RedisRateLimiter:
    def __init__(self, redis: Redis, *, burst_seconds: float = BURST_SECONDS, prefix: str = "hb:limit:"):
        self.redis = redis
        self.burst_seconds = burst_seconds
        self.prefix = prefix
        self.script = redis.register_script(_ACQUIRE)

    async def acquire(self, endpoint: CallTarget, tokens: int) -> None:
        if not _limited(endpoint):
            return
        args = [
            endpoint.requests_per_minute or 0,
            endpoint.tokens_per_minute or 0,
            tokens,
            self.burst_seconds,
            KEY_TTL_SECONDS,
        ]
        while (wait := float(await self.script(keys=[self.prefix + endpoint.limit_key], args=args))) > 0:
            # The jitter spreads the waiters that the same refill would otherwise wake together.
            await asyncio.sleep(wait * random.uniform(1.0, 1.1))  # noqa: S311 - jitter, not a secret

    async def settle(self, endpoint: CallTarget, delta: int) -> None:
        if endpoint.tokens_per_minute and delta:
            await self.redis.hincrbyfloat(self.prefix + endpoint.limit_key, "t", -delta)


# --- one per event loop ---------------------------------------------------------------------

# Redis clients belong to the event loop their connections were made on.
_per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Redis | None, RateLimiter]] = (
    weakref.WeakKeyDictionary()
)


def redis_for_loop() -> Redis | None:
    """The event loop's Redis client (None without REDIS_URL); clients are bound to a loop."""
    return _loop_state()[0]


def limiter_for_loop() -> RateLimiter:
    return _loop_state()[1]


def _loop_state() -> tuple[Redis | None, RateLimiter]:
    loop = asyncio.get_running_loop()
    state = _per_loop.get(loop)
    if state is None:
        if settings.REDIS_URL:
            from redis.asyncio import BlockingConnectionPool, Redis

            # Hundreds of calls in flight may each ask the rate limiter at once: they wait
            # for one of a few connections instead of failing with "too many connections".
            redis = Redis.from_pool(BlockingConnectionPool.from_url(settings.REDIS_URL, max_connections=32, timeout=30))
            state = (redis, RedisRateLimiter(redis))
        else:
            state = (None, LocalRateLimiter())
        _per_loop[loop] = state
    return state
