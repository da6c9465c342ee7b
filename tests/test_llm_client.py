"""The OpenAI-compatible client against a real local HTTP server: answers, usage, faults,
retries, re-asking, and the limits shared through Redis."""

import asyncio
import os
import threading
import time

import pytest

from grading.pipeline import client as llm
from grading.pipeline.client import CallFailed, RetryPolicy, ask_grader, chat
from grading.pipeline.endpoint import CallTarget, EndpointConfigError
from grading.pipeline.rate_limit import LocalRateLimiter, RedisRateLimiter
from grading.pipeline.slots import LocalSlots, RedisSlots

pytest_plugins = ["tests.llm_server"]

FAST = RetryPolicy(max_attempts=4, format_attempts=3, base_delay=0.02, max_delay=0.1)
MET_PROMPT = "user: hi\n\nassistant: eat a kiwi\n\n[5] Mentions need:kiwi"
NOT_MET_PROMPT = "user: hi\n\nassistant: eat a mango\n\n[5] Mentions need:kiwi"
NO_LIMIT = LocalRateLimiter()


def endpoint(server, **changes) -> CallTarget:
    fields = {
        "base_url": server.url,
        "model": "grader",
        "api_key_env": "",
        "temperature": 0.0,
        "max_tokens": 200,
        "timeout": 2.0,
    }
    return CallTarget(**{**fields, **changes})


def run(coroutine):
    """Run on a fresh event loop, closing the loop's HTTP clients after."""

    async def then_close():
        try:
            return await coroutine
        finally:
            await llm.close_clients()

    return asyncio.run(then_close())


def ask(server, prompt=MET_PROMPT, policy=FAST, **changes):
    return run(ask_grader(endpoint(server, **changes), prompt, limiter=NO_LIMIT, policy=policy))


def test_it_returns_the_answer_and_the_token_usage(llm_server):
    reply = run(chat(endpoint(llm_server), [{"role": "user", "content": MET_PROMPT}], limiter=NO_LIMIT, policy=FAST))
    assert '"criteria_met": true' in reply.content
    assert reply.prompt_tokens == len(MET_PROMPT) // 4
    assert reply.completion_tokens > 0
    assert reply.attempts == 1


def test_the_grader_verdict_and_explanation_are_read(llm_server):
    assert ask(llm_server).met is True
    outcome = ask(llm_server, NOT_MET_PROMPT)
    assert outcome.met is False
    assert outcome.explanation == "It is not there."
    assert outcome.attempts == 1


def test_a_429_is_retried_after_the_time_retry_after_gives(llm_server):
    llm_server.retry_after = 0.4
    llm_server.inject("429")
    start = time.monotonic()
    outcome = ask(llm_server)
    assert outcome.met is True
    assert outcome.attempts == 2
    assert time.monotonic() - start >= 0.4


@pytest.mark.parametrize("fault", ["500", "reset"])
def test_server_errors_and_dropped_connections_are_retried(llm_server, fault):
    llm_server.inject(fault, times=2)
    outcome = ask(llm_server)
    assert outcome.met is True
    assert outcome.attempts == 3


def test_an_answer_slower_than_the_timeout_is_abandoned_and_asked_again(llm_server):
    llm_server.slow_seconds = 2.0
    llm_server.inject("slow")
    start = time.monotonic()
    outcome = ask(llm_server, timeout=0.3)
    assert outcome.met is True
    assert outcome.attempts == 2
    assert time.monotonic() - start < 1.5


def test_backoff_grows_exponentially_with_jitter():
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)]:
        delays = {policy.backoff(attempt) for _ in range(50)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(delays) > 1


def test_it_gives_up_after_the_last_attempt_and_says_why(llm_server):
    llm_server.inject("500", times=10)
    with pytest.raises(
        CallFailed, match=r"HTTP 500 from grader: The server had an error \(gave up after 4 attempts\)"
    ) as failed:
        run(chat(endpoint(llm_server), [{"role": "user", "content": "x"}], limiter=NO_LIMIT, policy=FAST))
    assert failed.value.attempts == 4


def test_a_client_error_is_not_retried(llm_server):
    outcome = ask(llm_server, base_url=llm_server.url + "/nowhere")
    assert outcome.met is None
    assert outcome.attempts == 1
    assert outcome.error.startswith("HTTP 404")


def test_a_grade_that_fails_for_good_has_no_verdict_and_keeps_the_error(llm_server):
    llm_server.inject("500", times=10)
    outcome = ask(llm_server)
    assert outcome.met is None
    assert outcome.attempts == 4
    assert "gave up after 4 attempts" in outcome.error


def test_a_malformed_answer_is_asked_again_and_every_answer_counts_its_tokens(llm_server):
    llm_server.inject("malformed")
    outcome = ask(llm_server)
    assert outcome.met is True
    assert outcome.attempts == 2
    single = ask(llm_server)
    assert outcome.prompt_tokens == 2 * single.prompt_tokens


def test_a_non_boolean_verdict_is_asked_again_a_bounded_number_of_times(llm_server):
    llm_server.inject("non_boolean", times=5)
    outcome = ask(llm_server)
    assert outcome.met is None
    assert outcome.attempts == 3
    assert outcome.error == 'unreadable answer 3 times: criteria_met is "yes", not a JSON boolean'
    assert outcome.raw_output == '{"explanation": "Unsure.", "criteria_met": "yes"}'


def test_a_named_api_key_variable_that_is_not_set_is_a_configuration_error(monkeypatch, settings):
    settings.ENDPOINT_KEY_VARIABLES = ["HB_TEST_KEY"]
    monkeypatch.delenv("HB_TEST_KEY", raising=False)
    with pytest.raises(EndpointConfigError, match=r"HB_TEST_KEY.*is not set"):
        CallTarget(base_url="", model="m", api_key_env="HB_TEST_KEY", temperature=0, max_tokens=1, timeout=1).api_key()


# --- limits -----------------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_token_bucket_keeps_requests_per_minute():
    clock = Clock()
    limiter = LocalRateLimiter(burst_seconds=6, clock=clock)
    point = CallTarget(
        base_url="", model="m", api_key_env="", temperature=0, max_tokens=1, timeout=1, requests_per_minute=60
    )
    assert [limiter.take(point, 10) for _ in range(6)] == [0] * 6  # a burst of 6 s worth
    assert limiter.take(point, 10) == pytest.approx(1.0)  # then one a second
    clock.now = 1.0
    assert limiter.take(point, 10) == 0


def test_the_token_bucket_keeps_tokens_per_minute_and_settles_the_real_count():
    clock = Clock()
    limiter = LocalRateLimiter(burst_seconds=6, clock=clock)
    point = CallTarget(
        base_url="", model="m", api_key_env="", temperature=0, max_tokens=1, timeout=1, tokens_per_minute=6000
    )
    assert limiter.take(point, 600) == 0  # the bucket holds 600
    assert limiter.take(point, 100) == pytest.approx(1.0)  # refills 100 a second
    asyncio.run(limiter.settle(point, -300))  # the call used 300 fewer than estimated
    assert limiter.take(point, 100) == 0


redis_only = pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL)")


@redis_only
def test_workers_share_one_rate_limit_through_redis():
    from redis.asyncio import Redis

    point = CallTarget(
        base_url="http://shared.test",
        model=f"m{time.time()}",
        api_key_env="",
        temperature=0,
        max_tokens=1,
        timeout=1,
        requests_per_minute=1200,
    )

    async def two_workers():
        redis = Redis.from_url(os.environ["REDIS_URL"])
        workers = [RedisRateLimiter(redis, burst_seconds=0.5), RedisRateLimiter(redis, burst_seconds=0.5)]
        start = time.monotonic()
        await asyncio.gather(*(workers[i % 2].acquire(point, 1) for i in range(30)))
        elapsed = time.monotonic() - start
        await redis.aclose()
        return elapsed

    # 20 a second with a bucket of 10: the 20 requests beyond the bucket take a second.
    assert asyncio.run(two_workers()) >= 0.9


async def share_slots(first, second, third) -> list:
    """Two tasks share a run's 5 slots; a third comes when both have expired."""
    got = [await first.acquire(4)]  # alone: takes what it wants
    got.append(await second.acquire(4))  # 1 is free; it waits for 3 more
    got.append(await first.acquire(0))  # someone waits: first is capped at its share, 3
    got.append(await first.acquire(0, released=2))  # two of its calls came back; it keeps 2
    got.append(await second.acquire(3))  # nobody else waits: takes the 2 free
    await asyncio.sleep(0.4)  # neither renews: both expire
    got.append(await third.acquire(9))
    for holder in (first, second, third):
        await holder.close()
    return got


SHARED = [(4, 5), (1, 5), (0, 3), (0, 3), (2, 5), (5, 5)]


@redis_only
def test_run_slots_are_shared_fairly_and_freed_when_their_holders_die():
    from redis.asyncio import Redis

    async def scenario():
        redis = Redis.from_url(os.environ["REDIS_URL"])
        key = f"hb:test:slots:{time.time()}"
        holders = [RedisSlots(redis, key, 5, ttl=0.3) for _ in range(3)]
        got = await share_slots(*holders)
        await redis.aclose()
        return got

    assert asyncio.run(scenario()) == SHARED


def test_local_slots_are_shared_fairly_by_the_tasks_of_one_process():
    async def scenario():
        holders = [LocalSlots("run-x", 5) for _ in range(3)]
        return await share_slots(*holders)

    # Local holders do not expire; the third finds the others' slots still held.
    assert asyncio.run(scenario())[:5] == SHARED[:5]


def test_two_tasks_of_a_run_share_its_bound_fairly_and_never_exceed_it():
    from grading.pipeline.engine import run_lanes

    in_flight = {"now": 0, "most": 0, "both_at_once": False}
    running: dict[str, int] = {"a": 0, "b": 0}

    async def scenario():
        async def work(job):
            owner = job[0]
            running[owner] += 1
            in_flight["now"] += 1
            in_flight["most"] = max(in_flight["most"], in_flight["now"])
            in_flight["both_at_once"] |= running["a"] > 0 and running["b"] > 0
            await asyncio.sleep(0.01)
            in_flight["now"] -= 1
            running[owner] -= 1
            return job

        done: list = []
        tasks = [
            run_lanes(
                [(owner, i) for i in range(40)],
                work,
                lambda job, result: done.append(result),
                concurrency=4,
                slots=LocalSlots("run-shared", 4),
                stop=threading.Event(),
                heartbeat=0.02,
            )
            for owner in ("a", "b")
        ]
        await asyncio.gather(*tasks)
        return done

    assert len(asyncio.run(scenario())) == 80
    assert in_flight["most"] == 4
    assert in_flight["both_at_once"]
