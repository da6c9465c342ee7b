"""Requests and tokens per minute per endpoint, kept by all workers together.

A token bucket per limit: it refills at limit/60 per second and holds at most
``BURST_SECONDS`` worth, so a fresh run cannot fire a whole minute's quota in its first
second (providers enforce their limits over short windows too). A request takes one request
and its estimated tokens; when the endpoint reports the real count, the difference is settled
(a refund can make room, an overrun leaves a debt that later requests wait out).

With Redis configured the buckets live there, updated by one Lua script per request, on the
Redis clock, so every worker on every machine draws from the same bucket. Without Redis each
worker process keeps its own buckets: the limits then hold per process, not in total.

What the provider says slows the whole run, not only the call it answered (``slow_down``):

* a 429 (or a 503) with ``retry-after``, ``retry-after-ms`` or the ``x-ratelimit-reset-*`` of a
  spent limit holds every call to that endpoint, from every worker, until then; the waiters
  then start spread over ``HOLD_SPREAD_SECONDS``, not all at once;
* the limits it states in ``x-ratelimit-limit-requests`` and ``x-ratelimit-limit-tokens``
  (OpenAI's headers, on each reply) become the endpoint's, at ``LEARNED_SHARE`` of them, where
  they are lower than the curator's (or none were set); its buckets start empty after the
  hold, so calls resume at that pace instead of in a burst that would be refused again.

An endpoint without limits of its own costs no Redis call per request: a process consults
the shared state once it has been told to slow down itself, or finds (a look every
``PEEK_SECONDS``) that another worker was.
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
LEARNED_SHARE = 0.95  # of a limit the provider states: a margin for its own window and clock
HOLD_SPREAD_SECONDS = 0.5
PEEK_SECONDS = 1.0

# KEYS[1]: the bucket hash. ARGV: requests per minute, tokens per minute, token cost,
# burst seconds (0 for a limit means none), key TTL. Returns "0" when the request may go, else
# the seconds to wait before asking again (as a string: Lua numbers come back as integers),
# after an "h" when the wait is a hold's.
# Fields: r, t (what the buckets hold), ts (their last refill; later than now during a hold),
# hold (no request before it), lr, lt (the limits the provider stated).
_ACQUIRE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1e6
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local cost, burst = tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'r', 't', 'ts', 'hold', 'lr', 'lt')
local hold = tonumber(state[4]) or 0
if hold > now then return 'h' .. tostring(hold - now) end
local lr, lt = tonumber(state[5]) or 0, tonumber(state[6]) or 0
if lr > 0 and (rpm == 0 or lr < rpm) then rpm = lr end
if lt > 0 and (tpm == 0 or lt < tpm) then tpm = lt end
if rpm == 0 and tpm == 0 then return "0" end
local cap_r, cap_t = math.max(1, rpm * burst / 60), math.max(1, tpm * burst / 60)
local r = tonumber(state[1]) or cap_r
local t = tonumber(state[2]) or cap_t
local ts = tonumber(state[3]) or now
local elapsed = math.max(0, now - ts)
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
redis.call('HSET', KEYS[1], 'r', tostring(r), 't', tostring(t), 'ts', tostring(math.max(ts, now)))
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
return tostring(wait)
"""

# KEYS[1]: the bucket hash. ARGV: seconds to hold, the requests and tokens per minute the
# provider stated (0: not stated), key TTL. The buckets are emptied and refill from the hold's end.
_SLOW_DOWN = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1e6
local state = redis.call('HMGET', KEYS[1], 'r', 't', 'ts', 'hold')
local hold = math.max(tonumber(state[4]) or 0, now + tonumber(ARGV[1]))
local r, t = math.min(tonumber(state[1]) or 0, 0), math.min(tonumber(state[2]) or 0, 0)
local ts = math.max(tonumber(state[3]) or now, hold)
redis.call('HSET', KEYS[1], 'hold', tostring(hold), 'r', tostring(r), 't', tostring(t), 'ts', tostring(ts))
if tonumber(ARGV[2]) > 0 then redis.call('HSET', KEYS[1], 'lr', ARGV[2]) end
if tonumber(ARGV[3]) > 0 then redis.call('HSET', KEYS[1], 'lt', ARGV[3]) end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
return 1
"""


class RateLimiter(Protocol):
    async def acquire(self, endpoint: CallTarget, tokens: int) -> None: ...

    async def settle(self, endpoint: CallTarget, delta: int) -> None: ...

    async def slow_down(
        self, endpoint: CallTarget, *, seconds: float, requests_per_minute: int = 0, tokens_per_minute: int = 0
    ) -> None:
        """The provider said: nothing more before `seconds` from now, and (when it stated
        them, else 0) these are its limits."""
        ...


def _limited(endpoint: CallTarget) -> bool:
    return bool(endpoint.requests_per_minute or endpoint.tokens_per_minute)


def learned(stated: int) -> int:
    """The pace kept under a limit the provider stated."""
    return max(1, int(stated * LEARNED_SHARE)) if stated > 0 else 0


def _spread(wait: float) -> float:
    return wait + random.uniform(0, HOLD_SPREAD_SECONDS)  # noqa: S311 - jitter, not a secret


def _lower(configured: int, stated: int) -> int:
    return stated if stated and (not configured or stated < configured) else configured


class LocalRateLimiter:
    """The same buckets inside one process (no Redis)."""

    def __init__(self, *, burst_seconds: float = BURST_SECONDS, clock=time.monotonic):
        self.burst_seconds = burst_seconds
        self.clock = clock
        self.lock = threading.Lock()
        self.buckets: dict[str, list[float]] = {}  # key -> [requests, tokens, last refill]
        self.told: dict[str, list[float]] = {}  # key -> [hold until, stated rpm, stated tpm]

    def take(self, endpoint: CallTarget, tokens: int) -> float:
        """Take from the buckets and return 0, or return how long to wait."""
        rpm, tpm = endpoint.requests_per_minute or 0, endpoint.tokens_per_minute or 0
        with self.lock:
            now = self.clock()
            hold, stated_r, stated_t = self.told.get(endpoint.limit_key, (0.0, 0, 0))
            if hold > now:
                return hold - now
            rpm, tpm = _lower(rpm, int(stated_r)), _lower(tpm, int(stated_t))
            if not rpm and not tpm:
                return 0.0
            cap_r, cap_t = max(1.0, rpm * self.burst_seconds / 60), max(1.0, tpm * self.burst_seconds / 60)
            r, t, last = self.buckets.get(endpoint.limit_key, (cap_r, cap_t, now))
            elapsed = max(0.0, now - last)  # the last refill is in the future during a hold
            r = min(cap_r, r + elapsed * rpm / 60)
            t = min(cap_t, t + elapsed * tpm / 60)
            wait = 0.0
            if rpm and r < 1:
                wait = max(wait, (1 - r) * 60 / rpm)
            need = min(tokens, cap_t)
            if tpm and t < need:
                wait = max(wait, (need - t) * 60 / tpm)
            if wait == 0:
                r, t = r - (1 if rpm else 0), t - (tokens if tpm else 0)
            self.buckets[endpoint.limit_key] = [r, t, max(last, now)]
            return wait

    async def acquire(self, endpoint: CallTarget, tokens: int) -> None:
        if not _limited(endpoint) and endpoint.limit_key not in self.told:
            return
        while (wait := self.take(endpoint, tokens)) > 0:
            await asyncio.sleep(_spread(wait) if self._held(endpoint) else wait * random.uniform(1.0, 1.1))  # noqa: S311 - jitter, not a secret

    def _held(self, endpoint: CallTarget) -> bool:
        told = self.told.get(endpoint.limit_key)
        return told is not None and told[0] > self.clock()

    async def settle(self, endpoint: CallTarget, delta: int) -> None:
        if not delta:
            return
        with self.lock:
            bucket = self.buckets.get(endpoint.limit_key)
            if bucket is not None:
                bucket[1] -= delta

    async def slow_down(
        self, endpoint: CallTarget, *, seconds: float, requests_per_minute: int = 0, tokens_per_minute: int = 0
    ) -> None:
        with self.lock:
            now = self.clock()
            hold, stated_r, stated_t = self.told.get(endpoint.limit_key, (0.0, 0, 0))
            hold = max(hold, now + seconds)
            self.told[endpoint.limit_key] = [
                hold,
                learned(requests_per_minute) or stated_r,
                learned(tokens_per_minute) or stated_t,
            ]
            r, t, last = self.buckets.get(endpoint.limit_key, (0.0, 0.0, now))
            self.buckets[endpoint.limit_key] = [min(r, 0.0), min(t, 0.0), max(last, hold)]


class RedisRateLimiter:
    def __init__(self, redis: Redis, *, burst_seconds: float = BURST_SECONDS, prefix: str = "hb:limit:"):
        self.redis = redis
        self.burst_seconds = burst_seconds
        self.prefix = prefix
        self.script = redis.register_script(_ACQUIRE)
        self.slow_script = redis.register_script(_SLOW_DOWN)
        self.told: set[str] = set()  # limit keys some worker was told to slow down for
        self.peeked: dict[str, float] = {}  # limit key -> when this process last looked

    async def _watched(self, endpoint: CallTarget) -> bool:
        """Whether calls to an endpoint without limits of its own must ask the shared state:
        once this process, or (seen at a look every PEEK_SECONDS) another, was told to slow down."""
        key = endpoint.limit_key
        if key in self.told:
            return True
        now = time.monotonic()
        if now - self.peeked.get(key, 0.0) < PEEK_SECONDS:
            return False
        self.peeked[key] = now
        if any(await self.redis.hmget(self.prefix + key, ["hold", "lr", "lt"])):
            self.told.add(key)
            return True
        return False

    async def acquire(self, endpoint: CallTarget, tokens: int) -> None:
        if not _limited(endpoint) and not await self._watched(endpoint):
            return
        args = [
            endpoint.requests_per_minute or 0,
            endpoint.tokens_per_minute or 0,
            tokens,
            self.burst_seconds,
            KEY_TTL_SECONDS,
        ]
        while (said := (await self.script(keys=[self.prefix + endpoint.limit_key], args=args)).decode()) != "0":
            # The jitter spreads the waiters that the same refill would otherwise wake together;
            # after a hold, over HOLD_SPREAD_SECONDS.
            if said.startswith("h"):
                await asyncio.sleep(_spread(float(said[1:])))
            else:
                await asyncio.sleep(float(said) * random.uniform(1.0, 1.1))  # noqa: S311 - jitter, not a secret

    async def settle(self, endpoint: CallTarget, delta: int) -> None:
        if delta and (endpoint.tokens_per_minute or endpoint.limit_key in self.told):
            await self.redis.hincrbyfloat(self.prefix + endpoint.limit_key, "t", -delta)

    async def slow_down(
        self, endpoint: CallTarget, *, seconds: float, requests_per_minute: int = 0, tokens_per_minute: int = 0
    ) -> None:
        self.told.add(endpoint.limit_key)
        args = [seconds, learned(requests_per_minute), learned(tokens_per_minute), KEY_TTL_SECONDS]
        await self.slow_script(keys=[self.prefix + endpoint.limit_key], args=args)


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
