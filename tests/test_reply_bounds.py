"""A whole-call deadline and a byte cap on every grader call, over real HTTP
(grading/pipeline/bounded_transport.py): a trickling reply ends at the endpoint's timeout, a
50 MB reply and a gzip bomb fail with "reply too large" and the process holds no more than a
few times the cap meanwhile."""

import time
import tracemalloc

import pytest

from grading.pipeline.client import CallFailed, RetryPolicy, chat
from tests.test_llm_client import MET_PROMPT, NO_LIMIT, endpoint, run

pytest_plugins = ["tests.llm_server"]

ONE_TRY = RetryPolicy(max_attempts=1, format_attempts=1)
CAP = 4 * 1024 * 1024  # GRADING_REPLY_MAX_BYTES' default


def _call(server, **changes):
    messages = [{"role": "user", "content": MET_PROMPT}]
    return run(chat(endpoint(server, **changes), messages, limiter=NO_LIMIT, policy=ONE_TRY))


def test_a_trickling_reply_ends_at_the_endpoints_timeout(llm_server):
    llm_server.inject("trickle")
    start = time.monotonic()
    with pytest.raises(CallFailed, match=r"no answer within 2 s"):
        _call(llm_server, timeout=2.0)
    # One byte a second never lets a per-read timeout fire; the whole call's deadline does.
    assert 2.0 <= time.monotonic() - start < 3.5


@pytest.mark.parametrize("fault", ["huge", "gzip_bomb"])
def test_a_swollen_reply_fails_as_too_large_without_growing_the_process(llm_server, fault):
    llm_server.huge_bytes = 50 * 1024 * 1024
    llm_server.bomb_bytes = 1024 * 1024 * 1024
    if fault == "gzip_bomb":
        from tests.llm_hostile import gzip_bomb

        gzip_bomb(llm_server.bomb_bytes)  # made before the measurement: the server's own memory
    llm_server.inject(fault)
    tracemalloc.start()
    try:
        with pytest.raises(CallFailed, match=r"reply too large: more than 4,194,304 bytes") as failed:
            _call(llm_server, timeout=30.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert failed.value.attempts == 1  # not asked again: the answer would swell again
    assert peak < 3 * CAP, f"peak {peak:,} bytes"


def test_a_gzip_reply_within_the_cap_is_read(llm_server):
    llm_server.bomb_bytes = 1024 * 1024  # a megabyte of spaces around a completion: valid JSON
    llm_server.inject("gzip_bomb")
    reply = _call(llm_server)
    assert set(reply.content) == {" "}
