"""A local OpenAI-compatible chat server over real HTTP, for tests and the grading benchmark.

It answers ``POST /v1/chat/completions`` in two modes, chosen by the requested model:

* a grader (any model not starting with ``policy``): the criterion names a word with
  ``need:WORD``; the criterion is met when WORD appears in the response under grading (the
  prompt after its last "assistant:"). The answer is the JSON our grader prompt asks for,
  sometimes inside a fenced block and with text around it, as real models do.
* a policy model (``policy...``): it replies with the words after ``say:`` in the last user
  turn, so a test decides what the sampled responses contain.

Every answer carries usage tokens (about four characters a token). Faults are injected
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


class LLMServer:
    """The server and its controls; start() binds 127.0.0.1 on a free port."""

    def __init__(self, *, latency: float = 0.0, retry_after: float = 1.0, slow_seconds: float = 3.0):
        self.latency = latency
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
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

    def answer(self, body: dict) -> tuple[int, dict, dict]:
        """(status, extra headers, JSON body) for one request; may sleep."""
        messages = body.get("messages") or []
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
            content = grader_reply(prompt)
        usage = {"prompt_tokens": max(1, len(prompt) // 4), "completion_tokens": max(1, len(content) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        completion = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage,
        }
        return 200, {}, completion


def grader_met(prompt: str) -> bool:
    """The rule: the criterion's ``need:WORD`` has WORD in the response under grading, i.e.
    after the last "assistant:" of the prompt (earlier turns do not count)."""
    needs = NEED.findall(prompt)
    if not needs:
        return False
    word = needs[-1]
    tail = prompt[max(0, prompt.rfind("assistant:")) :]
    return len(re.findall(rf"\b{re.escape(word)}\b", tail)) > tail.count(f"need:{word}")


def grader_reply(prompt: str) -> str:
    met = grader_met(prompt)
    answer = json.dumps({"explanation": "The response names it." if met else "It is not there.", "criteria_met": met})
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
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {}, {"error": {"message": f"no route {self.path}"}})
        try:
            body = json.loads(raw)
        except ValueError:
            return self._send(400, {}, {"error": {"message": "body is not JSON"}})
        with self.owner.lock:
            self.owner.in_flight += 1
            self.owner.max_in_flight = max(self.owner.max_in_flight, self.owner.in_flight)
        try:
            status, headers, payload = self.owner.answer(body)
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
