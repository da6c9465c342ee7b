"""Each kind of endpoint over real HTTP against the test server, which answers as the
provider does: the request shape per model, the Responses API, structured output, usage
details, and the faults that stop a run at once."""

import asyncio
import json
import socket
import time
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response as ResponsesReply

from grading.pipeline import client as llm
from grading.pipeline.client import CallFailed, FailureWatch, RetryPolicy, ask_grader, chat
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.rate_limit import LocalRateLimiter
from grading.pipeline.request_shape import GRADE_SCHEMA

pytest_plugins = ["tests.llm_server"]

FAST = RetryPolicy(max_attempts=4, format_attempts=3, base_delay=0.02, max_delay=0.1)
MET_PROMPT = "user: hi\n\nassistant: eat a kiwi\n\n[5] Mentions need:kiwi"
NO_LIMIT = LocalRateLimiter()


def target(server_url: str, **changes) -> CallTarget:
    fields: dict[str, Any] = {"base_url": server_url, "model": "grader", "api_key_env": "", "temperature": 0.0}
    fields |= {"max_tokens": 200, "timeout": 2.0, "name": "test"}
    return CallTarget(**(fields | changes))


def run(coroutine):
    async def then_close():
        try:
            return await coroutine
        finally:
            await llm.close_clients()

    return asyncio.run(then_close())


def grade(point: CallTarget, prompt: str = MET_PROMPT, watch: FailureWatch | None = None):
    return run(ask_grader(point, prompt, limiter=NO_LIMIT, policy=FAST, watch=watch))


def last_body(server) -> tuple[str, dict]:
    return server.requests[-1]


# --- request shapes ---------------------------------------------------------------------------


def test_a_reasoning_model_gets_max_completion_tokens_and_effort_and_no_temperature(llm_server):
    point = target(llm_server.url, model="o4-mini", reasoning=True, reasoning_effort="low", temperature=None)
    outcome = grade(point)
    assert outcome.met is True
    assert outcome.reasoning_tokens == 64
    path, body = last_body(llm_server)
    assert path == "/v1/chat/completions"
    assert body["max_completion_tokens"] == 200
    assert body["reasoning_effort"] == "low"
    assert "temperature" not in body
    assert "max_tokens" not in body


def test_a_reasoning_model_sent_temperature_fails_at_once_with_the_providers_words(llm_server):
    # A curator who forgot to tick "reasoning": every call would fail the same way.
    watch = FailureWatch(limit=50)
    outcome = grade(target(llm_server.url, model="gpt-5.4"), watch=watch)
    assert outcome.met is None
    assert outcome.fatal
    assert outcome.attempts == 1
    assert "Unsupported parameter: 'max_tokens' is not supported with this model" in outcome.error
    assert watch.reason == outcome.error


def test_an_ordinary_model_never_gets_reasoning_parameters(llm_server):
    outcome = grade(target(llm_server.url, temperature=0.0))
    assert outcome.met is True
    assert outcome.reasoning_tokens == 0
    _, body = last_body(llm_server)
    assert body["max_tokens"] == 200
    assert body["temperature"] == 0.0
    assert "reasoning_effort" not in body
    assert "max_completion_tokens" not in body


def test_the_responses_api_grades_with_input_and_reads_its_usage(llm_server):
    point = target(
        llm_server.url, model="gpt-5.4", api_style="responses", reasoning=True, reasoning_effort="low", temperature=None
    )
    outcome = grade(point)
    assert outcome.met is True
    assert outcome.explanation == "The response names it."
    assert outcome.reasoning_tokens == 64
    assert outcome.prompt_tokens == len(MET_PROMPT) // 4
    path, body = last_body(llm_server)
    assert path == "/v1/responses"
    assert body["input"] == [{"role": "user", "content": MET_PROMPT}]
    assert body["reasoning"] == {"effort": "low"}
    assert body["max_output_tokens"] == 200
    assert body["store"] is False
    assert "temperature" not in body
    assert "messages" not in body


def test_structured_output_sends_the_strict_schema_and_gets_bare_json(llm_server):
    outcome = grade(target(llm_server.url, structured_output=True))
    _, body = last_body(llm_server)
    assert body["response_format"]["json_schema"] == {"name": "rubric_grade", "schema": GRADE_SCHEMA, "strict": True}
    assert json.loads(outcome.raw_output) == {"explanation": "The response names it.", "criteria_met": True}
    responses = target(llm_server.url, api_style="responses", structured_output=True)
    outcome = grade(responses, prompt=MET_PROMPT + " again")
    _, body = last_body(llm_server)
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["text"]["format"]["strict"] is True
    assert json.loads(outcome.raw_output)["criteria_met"] is True


def test_cached_prompt_prefixes_are_reported_by_each_api(make_llm_server):
    server = make_llm_server(cache_min_tokens=128)
    prefix = "user: " + "a long shared conversation " * 100 + "\n\nassistant: eat a kiwi\n\n"
    first = grade(target(server.url), prefix + "[5] Mentions need:kiwi")
    second = grade(target(server.url), prefix + "[3] Mentions need:mango")
    assert first.cached_tokens == 0
    assert 0 < second.cached_tokens <= len(prefix) // 4
    assert second.cached_tokens % 128 == 0
    third = grade(target(server.url, api_style="responses"), prefix + "[2] Mentions need:guava")
    assert third.cached_tokens == second.cached_tokens


def test_the_servers_replies_are_what_the_openai_package_parses(llm_server):
    client = openai.OpenAI(base_url=llm_server.url, api_key="unused", max_retries=0)
    chat_reply = client.chat.completions.create(
        model="o3", messages=[{"role": "user", "content": MET_PROMPT}], max_completion_tokens=500
    )
    assert isinstance(chat_reply, ChatCompletion)
    assert chat_reply.usage.completion_tokens_details.reasoning_tokens == 128
    assert chat_reply.usage.prompt_tokens_details.cached_tokens == 0
    reply = client.responses.create(model="gpt-5.4", input=MET_PROMPT, reasoning={"effort": "low"})
    assert isinstance(reply, ResponsesReply)
    assert '"criteria_met": true' in reply.output_text
    assert reply.usage.output_tokens_details.reasoning_tokens == 64
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="o3", messages=[{"role": "user", "content": "x"}], temperature=0)
    assert refused.value.body == {
        "message": "Unsupported parameter: 'temperature' is not supported with this model.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "unsupported_parameter",
    }


# --- failing fast -----------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_connection_is_fatal_at_once_and_named_so():
    watch = FailureWatch(limit=50)
    started = time.monotonic()
    outcome = grade(target(f"http://127.0.0.1:{closed_port()}/v1"), watch=watch)
    assert time.monotonic() - started < 2
    assert outcome.fatal
    assert outcome.attempts == 1
    assert "connection refused" in outcome.error
    assert watch.reason is not None
    assert "connection refused" in watch.reason


def test_a_host_that_does_not_resolve_is_fatal():
    outcome = grade(target("http://no-such-host.invalid/v1"))
    assert outcome.fatal
    assert "could not resolve the host" in outcome.error


def test_a_bad_key_is_fatal_with_the_providers_message(monkeypatch, settings, make_llm_server):
    server = make_llm_server(api_key="sk-right")
    settings.ENDPOINT_KEY_VARIABLES = ["HB_CONTRACT_KEY"]
    monkeypatch.setenv("HB_CONTRACT_KEY", "sk-wrong")
    outcome = grade(target(server.url, api_key_env="HB_CONTRACT_KEY"))
    assert outcome.fatal
    assert outcome.error.startswith("HTTP 401 from test: Incorrect API key provided.")
    assert server.authorizations == {"Bearer sk-wrong": 1}


def test_an_unknown_model_is_fatal(llm_server):
    outcome = grade(target(llm_server.url, model="missing-model"))
    assert outcome.fatal
    assert "HTTP 404" in outcome.error
    assert "does not exist" in outcome.error


def test_a_streak_of_identical_failures_trips_the_watch_and_stops_the_other_calls(llm_server):
    llm_server.inject("500", times=100)
    watch = FailureWatch(limit=3)
    first = grade(target(llm_server.url), watch=watch)
    assert first.fatal
    assert first.attempts == 3
    assert watch.reason.startswith("3 calls in a row failed: HTTP 500")
    calls = llm_server.calls
    later = grade(target(llm_server.url), watch=watch)
    assert later.fatal
    assert later.attempts == 0
    assert llm_server.calls == calls


def test_429s_do_not_count_towards_the_streak(llm_server):
    llm_server.retry_after = 0.01
    llm_server.inject("429", times=3)
    watch = FailureWatch(limit=2)
    outcome = grade(target(llm_server.url), watch=watch)
    assert outcome.met is True
    assert watch.reason is None


def test_a_success_ends_the_streak(llm_server):
    watch = FailureWatch(limit=2)
    llm_server.inject("500", times=1)
    assert grade(target(llm_server.url), watch=watch).met is True
    llm_server.inject("500", times=1)
    assert grade(target(llm_server.url), watch=watch).met is True
    assert watch.reason is None


def test_chat_raises_a_fatal_call_failed_for_a_policy_at_a_closed_port():
    with pytest.raises(CallFailed) as failed:
        run(chat(target(f"http://127.0.0.1:{closed_port()}/v1"), [{"role": "user", "content": "x"}], limiter=NO_LIMIT))
    assert failed.value.fatal
    assert "connection refused" in str(failed.value)


# --- the hot path sends what the openai client sends -------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"api_style": "responses", "model": "gpt-5.4", "reasoning": True, "reasoning_effort": "low"},
        {"provider": "azure", "api_version": "2024-10-21", "model": "my-gpt41", "api_key_env": "HB_CONTRACT_KEY"},
        {"key_header": "x-gateway-key", "api_key_env": "HB_CONTRACT_KEY", "extra_query": (("team", "health"),)},
    ],
    ids=["chat", "responses", "azure-classic", "gateway"],
)
def test_a_live_call_sends_the_request_the_openai_client_builds(llm_server, settings, monkeypatch, changes):
    """grading.pipeline.endpoint_clients.LiveClient keeps the openai client's request of each
    path and sends it with each call's body: the same URL, headers and JSON as the client's own
    post() (but for the SDK's per-request retry count, which both send as 0)."""
    from openai._utils._json import openapi_dumps

    from grading.pipeline.endpoint_clients import client_for
    from grading.pipeline.request_shape import call_request

    settings.ENDPOINT_KEY_VARIABLES = ["HB_CONTRACT_KEY"]
    monkeypatch.setenv("HB_CONTRACT_KEY", "contract-key-0123456789abcdef")
    base = llm_server.url.removesuffix("/v1") if "api_version" in changes else llm_server.url
    point = target(base, **({"temperature": None} if changes.get("reasoning") else {}) | changes)
    path, body = call_request(point, [{"role": "user", "content": "é " + MET_PROMPT}], max_tokens=200)

    async def both() -> None:
        live = client_for(point)
        for _ in range(2):  # the second call reuses the request the first one made
            await live.post(path, body)
        await live.sdk.post(path, body=body, cast_to=bytes)

    run(both())
    sent = list(llm_server.received)[-3:]
    assert sent[0] == sent[1] == sent[2]
    assert [b for _, b in list(llm_server.requests)[-3:]] == [json.loads(openapi_dumps(body))] * 3
    assert sent[0][1]["content-length"] == str(len(openapi_dumps(body)))
