"""A provider's rate limit slows the whole run (grading.pipeline.rate_limit, ``slow_down``):
against the test server enforcing an RPM limit with OpenAI's 429s and headers, a run finishes,
no request goes out while the provider said to wait, and after the first refusals the run
keeps to the pace the provider stated instead of storming it with retries."""

import asyncio
import itertools
import os
import time
from typing import Any

import pytest

from grading.models import Endpoint, Grade, Run
from grading.pipeline import client as llm
from grading.pipeline.batches import batch_run
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.rate_limit import LEARNED_SHARE, LocalRateLimiter, RedisRateLimiter
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from tests.grading_data import imported_run

pytest_plugins = ["tests.llm_server"]


def point(**changes: Any) -> CallTarget:
    fields: dict[str, Any] = {
        "base_url": "http://limits.test",
        "model": f"m{time.time()}",
        "api_key_env": "",
        "temperature": 0,
    }
    return CallTarget(**(fields | {"max_tokens": 1, "timeout": 1} | changes))


@pytest.mark.django_db
def test_a_run_under_a_providers_rpm_limit_finishes_honours_its_waits_and_keeps_its_pace(make_llm_server):
    server = make_llm_server(rpm=60, rate_window=1.0)  # one request a second, a bucket of one
    endpoint = Endpoint.objects.create(
        name="limited", base_url=server.url, model="grader", key_variable="", timeout_seconds=10
    )
    source = imported_run(conversations=4, samples=1, n_criteria=2)
    run = run_launch(spec=RunRequest(name="limited", grader=endpoint, responses_from=source, concurrency=8))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, run.error
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 8

    arrivals = sorted(server.arrivals)
    refused = [at for at, status in arrivals if status == 429]
    assert refused, "the limit was reached"
    # The first round of calls in flight met the limit; after it no more than a stray refusal.
    first = refused[0]
    assert len([at for at in refused if at > first + 0.5]) <= 1
    assert len(refused) <= 8
    # The provider said "in about a second": nothing went out before then.
    later = [at for at, _ in arrivals if at > first + 0.2]
    assert later
    assert min(later) >= first + 0.9
    # Then at the pace it stated (60 a minute, kept at LEARNED_SHARE of it), not faster.
    accepted_after = [at for at, status in arrivals if status == 200 and at > first]
    gaps = [b - a for a, b in itertools.pairwise(accepted_after)]
    # (A stalled event loop may let the client's bucket fill and send two at once: at most once.)
    assert sorted(gaps)[1] >= 0.9 / LEARNED_SHARE * 0.9


def test_a_wait_the_provider_gave_holds_every_call_then_the_stated_pace_holds():
    limiter = LocalRateLimiter()
    target = point()
    asyncio.run(limiter.acquire(target, 10))  # an endpoint without limits is not slowed

    async def after_a_429() -> list[float]:
        await limiter.slow_down(target, seconds=0.3, requests_per_minute=600)
        start = time.monotonic()
        times = []

        async def call() -> None:
            await limiter.acquire(target, 10)
            times.append(time.monotonic() - start)

        await asyncio.gather(*(call() for _ in range(5)))
        return sorted(times)

    times = asyncio.run(after_a_429())
    assert times[0] >= 0.3  # the hold, for every call
    # 570 a minute after it (95% of the stated 600): the buckets start empty at its end, so
    # five calls take five refills however their waits were spread.
    assert times[-1] >= 0.3 + 5 * 60 / (600 * LEARNED_SHARE) - 0.01


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL)")
def test_a_wait_one_worker_was_given_holds_the_others_through_redis():
    from redis.asyncio import Redis

    target = point()

    async def two_workers() -> float:
        redis = Redis.from_url(os.environ["REDIS_URL"])
        told, other = RedisRateLimiter(redis), RedisRateLimiter(redis)
        await other.acquire(target, 10)  # nothing known yet: no wait (and a look at Redis)
        await told.slow_down(target, seconds=0.6)
        other.peeked.clear()  # its next look, as after PEEK_SECONDS
        start = time.monotonic()
        await other.acquire(target, 10)
        elapsed = time.monotonic() - start
        await redis.aclose()
        return elapsed

    assert asyncio.run(two_workers()) >= 0.5


def test_the_limits_a_429_states_are_read_from_openais_headers(make_llm_server):
    server = make_llm_server(rpm=60, tpm=100_000, rate_window=1.0)
    limiter = LocalRateLimiter()
    target = point(base_url=server.url, model="grader", timeout=5)
    policy = llm.RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)

    async def two_calls() -> None:
        messages = [{"role": "user", "content": "user: hi\n\nassistant: kiwi\n\n[5] Mentions need:kiwi"}]
        try:
            await asyncio.gather(*(llm.chat(target, messages, limiter=limiter, policy=policy) for _ in range(2)))
        finally:
            await llm.close_clients()

    asyncio.run(two_calls())
    _hold, rpm, tpm = limiter.told[target.limit_key]
    assert (rpm, tpm) == (int(60 * LEARNED_SHARE), int(100_000 * LEARNED_SHARE))
    assert [status for _, status in sorted(server.arrivals)] == [200, 429, 200]
