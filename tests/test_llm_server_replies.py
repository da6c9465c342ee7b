"""The test LLM server's replies, over HTTP, against the schemas written from the OpenAI API
specification (tests/openai_schemas.py, openapi.yaml 2.3.0): completions of both API styles
as answers, refusals, cut-off answers and reasoning output, and every error it sends."""

import json
import urllib.error
import urllib.request

import pytest
from jsonschema import Draft202012Validator

from tests.openai_schemas import CHAT_COMPLETION, ERROR_RESPONSE, RESPONSE, SPEC_VERSION

pytest_plugins = ["tests.llm_server"]

GRADER_PROMPT = "user: hi\n\nassistant: eat a kiwi\n\n[5] Mentions need:kiwi"


def post(server, path: str, body: dict, key: str = "") -> tuple[int, dict, dict]:
    request = urllib.request.Request(
        server.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, dict(reply.headers), json.loads(reply.read())
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), json.loads(refused.read())


def valid(schema: dict, instance: dict) -> None:
    errors = sorted(Draft202012Validator(schema).iter_errors(instance), key=str)
    assert not errors, (
        f"not valid against the {SPEC_VERSION} {schema['title']}: {errors[0].message} at {errors[0].json_path}"
    )


def chat(model: str, content: str, **fields) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": content}], **fields}


def responses(model: str, content: str, **fields) -> dict:
    return {"model": model, "input": [{"role": "user", "content": content}], "store": False, **fields}


CHAT_CASES = {
    "answer": chat("grader", GRADER_PROMPT, max_tokens=200),
    "structured": chat("grader", GRADER_PROMPT, response_format={"type": "json_schema", "json_schema": {}}),
    "reasoning": chat("o4-mini", GRADER_PROMPT, max_completion_tokens=500, reasoning_effort="xhigh"),
    "refusal": chat("policy-1", "refuse: please"),
    "cut-off": chat("policy-1", "ramble: on", max_tokens=30),
    "reasoning-cut-off": chat("o4-mini", GRADER_PROMPT, max_completion_tokens=20),
    "grader-refusal": chat("grader", GRADER_PROMPT + " fault:refusal:9"),
}
RESPONSES_CASES = {
    "answer": responses("grader", GRADER_PROMPT, max_output_tokens=200),
    "reasoning": responses("gpt-5.4", GRADER_PROMPT, reasoning={"effort": "low"}),
    "refusal": responses("policy-1", "refuse: please"),
    "cut-off": responses("policy-1", "ramble: on", max_output_tokens=30),
}


@pytest.mark.parametrize("case", CHAT_CASES)
def test_chat_completions_match_the_specification(llm_server, case):
    status, headers, body = post(llm_server, "/chat/completions", CHAT_CASES[case])
    assert status == 200
    valid(CHAT_COMPLETION, body)
    assert headers["x-ratelimit-limit-requests"]
    assert headers["x-ratelimit-remaining-tokens"]
    choice = body["choices"][0]
    if "refusal" in case:
        assert choice["message"]["refusal"]
        assert choice["message"]["content"] is None
    if "cut-off" in case:
        assert choice["finish_reason"] == "length"
        limit = CHAT_CASES[case].get("max_tokens") or CHAT_CASES[case]["max_completion_tokens"]
        assert body["usage"]["completion_tokens"] == limit


@pytest.mark.parametrize("case", RESPONSES_CASES)
def test_responses_match_the_specification(llm_server, case):
    status, _, body = post(llm_server, "/responses", RESPONSES_CASES[case])
    assert status == 200
    valid(RESPONSE, body)
    kinds = [item["type"] for item in body["output"]]
    if case == "reasoning":
        assert kinds == ["reasoning", "message"]  # the reasoning item first
    if case in ("answer", "reasoning"):
        assert len(body["output"][-1]["content"]) == 2  # the text in two output_text parts
    if case == "refusal":
        assert body["output"][-1]["content"] == [
            {"type": "refusal", "refusal": body["output"][-1]["content"][0]["refusal"]}
        ]
    if case == "cut-off":
        assert body["status"] == "incomplete"
        assert body["incomplete_details"] == {"reason": "max_output_tokens"}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (chat("o3", "x", temperature=0), 400, "unsupported_parameter"),
        (responses("grader", "x", reasoning={"effort": "low"}), 400, "unsupported_parameter"),
        (chat("missing-model", "x"), 404, "model_not_found"),
        (chat("grader", "x fault:429:9"), 429, "rate_limit_exceeded"),
        (chat("grader", "x fault:quota:9"), 429, "insufficient_quota"),
        (chat("grader", "x fault:too_long:9"), 400, "context_length_exceeded"),
        (chat("grader", "x fault:500:9"), 500, None),
    ],
)
def test_error_replies_match_the_specification(llm_server, body, status, code):
    got, headers, error = post(llm_server, "/responses" if "input" in body else "/chat/completions", body)
    assert got == status
    assert error["error"]["code"] == code
    valid(ERROR_RESPONSE, error)
    if code == "rate_limit_exceeded":
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert headers["Retry-After"]


def test_a_401_can_echo_the_key_it_was_sent(make_llm_server):
    server = make_llm_server(api_key="sk-right-key", echo_key=True)
    status, _, error = post(server, "/chat/completions", chat("grader", "x"), key="sk-wrong-key")
    assert status == 401
    assert error["error"]["message"] == "Incorrect API key provided: Bearer sk-wrong-key."
    valid(ERROR_RESPONSE, error)


def test_the_gateway_mode_rewrites_errors_as_litellm_does(make_llm_server):
    server = make_llm_server(gateway=True)
    status, _, error = post(server, "/responses", responses("o3", "x", temperature=0))
    assert status == 400
    assert error["error"]["type"] is None
    assert error["error"]["param"] is None
    assert error["error"]["code"] == "400"
    message = error["error"]["message"]
    assert message.startswith("litellm.BadRequestError: OpenAIException - {")
    assert json.loads(message.split(" - ", 1)[1].split(". Received Model Group")[0])["error"]["code"] == (
        "unsupported_parameter"
    )
    status, _, error = post(server, "/chat/completions", chat("grader", "x fault:quota:9"))
    assert status == 429
    assert error["error"]["code"] == "429"
    assert error["error"]["message"].startswith(
        "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded"
    )


def test_a_redirecting_server_answers_307_with_where(make_llm_server):
    server = make_llm_server(redirect_to="http://elsewhere.test/v1")
    request = urllib.request.Request(server.url + "/chat/completions", data=b"{}", method="POST")

    class NoFollow(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    with pytest.raises(urllib.error.HTTPError) as moved:
        urllib.request.build_opener(NoFollow).open(request, timeout=5)
    assert moved.value.code == 307
    assert moved.value.headers["Location"] == "http://elsewhere.test/v1/chat/completions"
