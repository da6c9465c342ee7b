"""A local OpenAI-compatible server over real HTTP, for tests and the grading benchmark.

It answers ``POST /v1/chat/completions`` and ``POST /v1/responses`` as the provider does,
in modes chosen by the requested model:

* a grader (any model not starting with ``policy``): the criterion names a word with
  ``need:WORD``; the criterion is met when WORD appears in the response under grading (the
  prompt after its last "assistant:"). The answer is the JSON our grader prompt asks for,
  sometimes inside a fenced block and with text around it, as real models do.
* a policy model (``policy...``): it replies with the words after ``say:`` in the last user
  turn, so a test decides what the sampled responses contain.
* a reasoning model (a name with ``reasoning`` in it, or starting ``o1``/``o3``/``o4``/
  ``gpt-5``): it rejects ``temperature`` and ``max_tokens`` (and, on Responses,
  ``temperature``) with OpenAI's 400 body, ``{"error": {"message", "type":
  "invalid_request_error", "param", "code": "unsupported_parameter"}}``, and spends
  reasoning tokens by effort. Other models reject ``reasoning_effort`` the same way.
* a model named ``missing...``: 404 ``model_not_found``. With ``api_key`` set, any other
  bearer token gets 401 ``invalid_api_key``; every token received is kept in
  ``authorizations`` so that tests can check what a worker sent.

Structured output (``response_format`` / ``text.format`` with a JSON schema) is honoured:
the grader's answer is then the bare JSON object. Usage carries
``prompt_tokens_details.cached_tokens`` and ``completion_tokens_details.reasoning_tokens``
(``input_tokens_details`` / ``output_tokens_details`` on Responses), from a prefix cache
that, like OpenAI's, serves a prompt's longest seen prefix in steps of 128 tokens once it
is ``cache_min_tokens`` long. Replies validate against the openai package's own types
(tests/test_llm_server.py). Faults are injected
either for the next requests in order (:meth:`LLMServer.inject`) or per prompt, by a marker
in the criterion text: ``fault:KIND:N`` makes the first N requests of that very prompt fail
with KIND, so a retried item meets the same faults whatever the order of arrival. KIND is
one of ``429`` (with Retry-After), ``500``, ``slow`` (answers after ``slow_seconds``, longer
than the client's timeout), ``malformed`` (no JSON), ``non_boolean`` (``"criteria_met":
"yes"``) and ``reset`` (closes the connection without an answer).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

NEED = re.compile(r"need:(\w+)")
FAULT = re.compile(r"fault:(\w+):(\d+)")
SAY = re.compile(r"say:((?:\s*\w+)+)")
KINDS = {"429", "500", "slow", "malformed", "non_boolean", "reset"}
REASONING_MODEL = re.compile(r"reasoning|^(o1|o3|o4|gpt-5)")
REASONING_TOKENS = {"minimal": 0, "low": 64, "medium": 192, "high": 512, "": 128}
CACHE_STEP_CHARS = 128 * 4  # OpenAI caches in steps of 128 tokens
RESPONSES_FIELDS = {
    "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "reasoning", "text", "store",
    "metadata", "user", "truncation", "parallel_tool_calls", "tools", "tool_choice", "previous_response_id",
    "include", "stream", "service_tier", "background",
}  # fmt: skip


def is_reasoning(model: str) -> bool:
    return bool(REASONING_MODEL.search(model))


def api_error(status: int, message: str, *, param: str | None = None, code: str | None = None, kind: str = ""):
    """(status, headers, body) in the provider's error shape."""
    return (
        status,
        {},
        {"error": {"message": message, "type": kind or "invalid_request_error", "param": param, "code": code}},
    )


def unsupported(param: str, instead: str = "") -> tuple[int, dict, dict]:
    tail = f" Use '{instead}' instead." if instead else ""
    return api_error(
        400,
        f"Unsupported parameter: '{param}' is not supported with this model.{tail}",
        param=param,
        code="unsupported_parameter",
    )


class LLMServer:
    """The server and its controls; start() binds 127.0.0.1 on a free port."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        retry_after: float = 1.0,
        slow_seconds: float = 3.0,
        api_key: str | None = None,
        cache_min_tokens: int = 1024,
    ):
        self.latency = latency
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.api_key = api_key
        self.cache_min_tokens = cache_min_tokens
        self.prefixes: set[bytes] = set()
        self.authorizations: Counter[str] = Counter()
        self.requests: deque[tuple[str, dict]] = deque(maxlen=200)  # (path, body), the latest
        self.lock = threading.Lock()
        self.queued_faults: deque[str] = deque()
        self.calls = 0
        self.calls_by_prompt: Counter[str] = Counter()
        self.faults_served: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.httpd: ThreadingHTTPServer | None = None

    # --- controls -------------------------------------------------------------------------

    def inject(self, kind: str, times: int = 1) -> None:
        """The next `times` requests, whatever they are, fail with `kind`."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}")
        with self.lock:
            self.queued_faults.extend([kind] * times)

    def reset_counts(self) -> None:
        with self.lock:
            self.calls = 0
            self.calls_by_prompt.clear()
            self.faults_served.clear()
            self.max_in_flight = self.in_flight

    @property
    def url(self) -> str:
        assert self.httpd is not None, "start the server first"
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> LLMServer:
        server = self

        class Handler(_Handler):
            owner = server

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        # A burst of 100+ new connections overflows the default listen backlog of 5, and
        # the kernel then delays them by a SYN retry (a second), which would look like latency.
        self.httpd.request_queue_size = 1024
        self.httpd.daemon_threads = True
        self.httpd.server_bind()
        self.httpd.server_activate()
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    # --- behaviour ------------------------------------------------------------------------

    def _fault_for(self, prompt: str, key: str) -> str | None:
        with self.lock:
            self.calls += 1
            self.calls_by_prompt[key] += 1
            seen = self.calls_by_prompt[key]
            fault = self.queued_faults.popleft() if self.queued_faults else None
            if fault is None:
                for kind, times in FAULT.findall(prompt):
                    if seen <= int(times):
                        fault = kind
                        break
            if fault is not None:
                self.faults_served[fault] += 1
            return fault

    def _cached_tokens(self, prompt: str) -> int:
        """The longest prefix, in steps of 128 tokens, that an earlier prompt shared; then
        this prompt's prefixes are remembered."""
        data = prompt.encode()
        steps = range(CACHE_STEP_CHARS, len(data) + 1, CACHE_STEP_CHARS)
        digests = [hashlib.blake2b(data[:end], digest_size=16).digest() for end in steps]
        with self.lock:
            hit = max((i + 1 for i, d in enumerate(digests) if d in self.prefixes), default=0)
            self.prefixes.update(digests)
        tokens = hit * CACHE_STEP_CHARS // 4
        return tokens if tokens >= self.cache_min_tokens else 0

    def check_request(self, path: str, body: dict, authorization: str) -> tuple[int, dict, dict] | None:
        """The provider's refusals, before any work: key, model, parameters."""
        with self.lock:
            self.authorizations[authorization] += 1
            self.requests.append((path, body))
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            return api_error(401, "Incorrect API key provided.", code="invalid_api_key")
        model = str(body.get("model", ""))
        if model.startswith("missing"):
            return api_error(
                404, f"The model `{model}` does not exist or you do not have access to it.", code="model_not_found"
            )
        reasoning = is_reasoning(model)
        if path == "/v1/responses":
            unknown = sorted(set(body) - RESPONSES_FIELDS)
            if unknown:
                return api_error(400, f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
            if reasoning and "temperature" in body:
                return unsupported("temperature")
            if not reasoning and body.get("reasoning"):
                return unsupported("reasoning.effort")
            return None
        if reasoning and "max_tokens" in body:
            return unsupported("max_tokens", "max_completion_tokens")
        if reasoning and "temperature" in body:
            return unsupported("temperature")
        if not reasoning and "reasoning_effort" in body:
            return unsupported("reasoning_effort")
        return None

    def answer(self, body: dict, path: str = "/v1/chat/completions") -> tuple[int, dict, dict]:
        """(status, extra headers, JSON body) for one request; may sleep."""
        responses = path == "/v1/responses"
        messages = responses_messages(body) if responses else body.get("messages") or []
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        model = str(body.get("model", ""))
        fault = self._fault_for(prompt, hashlib.sha256(f"{model}\n{prompt}".encode()).hexdigest())
        if self.latency:
            time.sleep(self.latency)
        if fault == "429":
            error = {"error": {"message": "Rate limit reached", "type": "rate_limit_exceeded"}}
            return 429, {"Retry-After": f"{self.retry_after:g}"}, error
        if fault == "500":
            return 500, {}, {"error": {"message": "The server had an error", "type": "server_error"}}
        if fault == "slow":
            time.sleep(self.slow_seconds)
        if fault == "reset":
            return 0, {}, {}
        if model.startswith("policy"):
            content = policy_reply(messages)
        elif fault == "malformed":
            content = "The response looks fine to me, I would say it meets the criterion."
        elif fault == "non_boolean":
            content = json.dumps({"explanation": "Unsure.", "criteria_met": "yes"})
        else:
            content = grader_reply(prompt, structured=wants_schema(body))
        reasoning = 0
        if is_reasoning(model):
            effort = (body.get("reasoning") or {}).get("effort", "") if responses else body.get("reasoning_effort", "")
            reasoning = REASONING_TOKENS.get(str(effort or ""), 128)
        prompt_tokens = max(1, len(prompt) // 4)
        cached = self._cached_tokens(prompt)
        completion_tokens = max(1, len(content) // 4) + reasoning
        if responses:
            return 200, {}, responses_reply(body, model, content, prompt_tokens, cached, completion_tokens, reasoning)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        completion = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": usage,
        }
        return 200, {}, completion


def wants_schema(body: dict) -> bool:
    """Structured output asked: response_format (chat) or text.format (Responses) json_schema."""
    chat = (body.get("response_format") or {}).get("type") == "json_schema"
    responses = ((body.get("text") or {}).get("format") or {}).get("type") == "json_schema"
    return chat or responses


def responses_messages(body: dict) -> list[dict]:
    """The Responses API's instructions and input as chat-like messages."""
    messages = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    given = body.get("input") or ""
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    for item in given:
        content = item.get("content", "")
        if isinstance(content, list):
            content = "".join(str(part.get("text", "")) for part in content)
        messages.append({"role": item.get("role", "user"), "content": content})
    return messages


def responses_reply(
    body: dict, model: str, content: str, prompt_tokens: int, cached: int, completion_tokens: int, reasoning: int
) -> dict:
    output: list[dict] = []
    if is_reasoning(model):
        output.append({"id": "rs_test", "type": "reasoning", "summary": []})
    output.append(
        {
            "id": "msg_test",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": content, "annotations": []}],
        }
    )
    return {
        "id": "resp_test",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "parallel_tool_calls": True,
        "temperature": body.get("temperature"),
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": body.get("store", True),
        "text": body.get("text") or {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": {},
        "usage": {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": completion_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def grader_met(prompt: str) -> bool:
    """The rule: the criterion's ``need:WORD`` has WORD in the response under grading, i.e.
    after the last "assistant:" of the prompt (earlier turns do not count)."""
    needs = NEED.findall(prompt)
    if not needs:
        return False
    word = needs[-1]
    tail = prompt[max(0, prompt.rfind("assistant:")) :]
    return len(re.findall(rf"\b{re.escape(word)}\b", tail)) > tail.count(f"need:{word}")


def grader_reply(prompt: str, *, structured: bool = False) -> str:
    met = grader_met(prompt)
    answer = json.dumps({"explanation": "The response names it." if met else "It is not there.", "criteria_met": met})
    if structured:
        return answer
    # Vary the wrapping as real models do; the parser must take all of these.
    style = len(prompt) % 3
    if style == 0:
        return answer
    if style == 1:
        return f"```json\n{answer}\n```"
    return f"Here is my judgement.\n{answer}\nI hope this helps."


def policy_reply(messages: list[dict]) -> str:
    last = next((m for m in reversed(messages) if m.get("role") == "user"), {"content": ""})
    words = SAY.search(str(last.get("content", "")))
    return f"Reply: {words.group(1).strip()}." if words else "Reply: nothing to say."


class _Handler(BaseHTTPRequestHandler):
    owner: LLMServer
    # Keep-alive, as real endpoints do: a client reuses its connections.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm on, the second waits
    # for the client's delayed ACK (40 ms), which would look like latency.
    disable_nagle_algorithm = True

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        path = self.path.rstrip("/")
        if path not in ("/v1/chat/completions", "/v1/responses"):
            return self._send(404, {}, {"error": {"message": f"no route {self.path}"}})
        try:
            body = json.loads(raw)
        except ValueError:
            return self._send(400, {}, {"error": {"message": "body is not JSON"}})
        refusal = self.owner.check_request(path, body, self.headers.get("Authorization", ""))
        if refusal is not None:
            return self._send(*refusal)
        with self.owner.lock:
            self.owner.in_flight += 1
            self.owner.max_in_flight = max(self.owner.max_in_flight, self.owner.in_flight)
        try:
            status, headers, payload = self.owner.answer(body, path)
        finally:
            with self.owner.lock:
                self.owner.in_flight -= 1
        if status == 0:
            self.close_connection = True
            self.connection.close()
            return
        self._send(status, headers, payload)

    def _send(self, status: int, headers: dict, payload: dict) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (a timeout test): nothing to answer to.
            self.close_connection = True


@pytest.fixture
def llm_server():
    server = LLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def make_llm_server():
    """Servers with other settings (a required key, a small prompt cache), stopped after."""
    servers: list[LLMServer] = []

    def make(**options) -> LLMServer:
        servers.append(LLMServer(**options).start())
        return servers[-1]

    yield make
    for server in servers:
        server.stop()
