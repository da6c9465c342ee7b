"""A local OpenAI-compatible server over real HTTP, for tests and the grading benchmark.

It answers ``POST /v1/chat/completions`` and ``POST /v1/responses`` as the provider does,
in modes chosen by the requested model:

* a grader (any model not starting with ``policy``): the criterion names a word with
  ``need:WORD``; the criterion is met when WORD appears in the response under grading (the
  prompt after its last "assistant:"). The answer is the JSON our grader prompt asks for,
  sometimes inside a fenced block or with text around it, as real models do; asked again
  about the same prompt, an answer given with text around it comes bare, as a model sampled
  afresh answers (:func:`tests.llm_answers._wrapped`).
* a per-response grader request (the ``rubric_grades`` schema, or a prompt asking for a
  ``{"criteria": [...]}`` answer about numbered items): every item judged by the same rule
  on the same response, so both grading modes give the same verdicts; ``entry:KIND`` in an
  item's text spoils its entry (see :func:`tests.llm_answers.chunk_reply`).
* a policy model (``policy...``): it replies with the words after ``say:`` in the last user
  turn, so a test decides what the sampled responses contain.
* a reasoning model (a name with ``reasoning`` in it, or starting ``o1``/``o3``/``o4``/
  ``gpt-5``): it rejects ``temperature`` and ``max_tokens`` (and, on Responses,
  ``temperature``) with OpenAI's 400 body, ``{"error": {"message", "type":
  "invalid_request_error", "param", "code": "unsupported_parameter"}}``, and spends
  reasoning tokens by effort. Other models reject ``reasoning_effort`` the same way.
* a model named ``missing...``: 404 ``model_not_found``. With ``api_key`` set, any other
  bearer token gets 401 ``invalid_api_key`` (with ``echo_key``, its message repeats the
  token received, as some gateways do; ``echo_key`` may name a form of it instead, one of
  :data:`tests.llm_shapes.ECHO_FORMS`: base64, base64url, %-encoded, spaced, dotted,
  zero-width); every token received is kept in ``authorizations`` so that tests can check what a worker sent.
* a policy model whose last user turn says ``refuse:`` refuses (chat ``message.refusal``,
  a Responses ``refusal`` part); one told ``ramble:`` writes on past any output limit.

Every answer keeps to the request's output limit (``max_tokens``, ``max_completion_tokens``
or ``max_output_tokens``) as OpenAI does: reasoning tokens count first, and a longer answer
is cut there, with ``finish_reason: "length"`` or ``status: "incomplete"`` and
``incomplete_details.reason: "max_output_tokens"``. Responses output has the reasoning item
before the message and the text in two ``output_text`` parts. Every answer carries the
``x-ratelimit-*`` headers. Server settings: ``redirect_to`` answers every call with a 307
to that URL; ``dialect`` rewrites every error as that provider or gateway writes its own
(tests.llm_dialects: Azure, Gemini, Anthropic, vLLM, Ollama, OpenRouter with HTTP 200, and
``gateway=True`` for a LiteLLM 1.79 proxy); ``send_retry_after=False`` leaves Retry-After off 429s,
so that only the rate-limit headers say when to come back. ``rpm`` and ``tpm`` enforce a
provider's limits, as OpenAI does: a bucket per limit holding ``rate_window`` seconds' worth,
refilled continuously; a request that finds it short (one request, its prompt's tokens) gets
OpenAI's 429 (``rate_limit_exceeded``, "Rate limit reached for MODEL ... on requests per min
(RPM): Limit N, Used N, Requested 1. Please try again in 120ms. ...") with
``x-ratelimit-limit-*``, ``x-ratelimit-remaining-*``, ``x-ratelimit-reset-*`` and, unless
``send_retry_after=False``, ``retry-after-ms`` and ``retry-after``; each reply's headers say
what is left. ``arrivals`` keeps (time, status) of every request the limits judged.

Structured output (``response_format`` / ``text.format`` with a JSON schema) is honoured:
the grader's answer is then the bare JSON object. Usage carries
``prompt_tokens_details.cached_tokens`` and ``completion_tokens_details.reasoning_tokens``
(``input_tokens_details`` / ``output_tokens_details`` on Responses), from a prefix cache
that, like OpenAI's, serves a prompt's longest seen prefix in steps of 128 tokens once it
is ``cache_min_tokens`` long, and ``cache_write_tokens`` for the cacheable prefix it adds.
Replies validate against the openai package's own types (tests/test_endpoint_contracts.py)
and against schemas from the OpenAI specification (tests/test_llm_server_replies.py). Faults
are injected
either for the next requests in order (:meth:`LLMServer.inject`) or per prompt, by a marker
in the criterion text: ``fault:KIND:N`` makes the first N requests of that very prompt fail
with KIND, so a retried item meets the same faults whatever the order of arrival. KIND is
one of ``429`` (with Retry-After), ``quota`` (429 ``insufficient_quota``), ``too_long`` (400
``context_length_exceeded``, a fault of that one call), ``content_filter`` (Azure's 400
``content_filter`` with its ``innererror``), ``500``, ``slow``
(answers after ``slow_seconds``, longer than the client's timeout), ``malformed`` (no JSON),
``non_boolean`` (``"criteria_met": "yes"``), ``chatty`` (the JSON between two sentences,
which only a lenient reading takes), ``refusal`` (the grader refuses), ``verbose``
(about 300 tokens of musing before the verdict, so a smaller output limit cuts it off) and
``reset`` (closes the connection without an answer).

Hostile replies (issue 28), each a :class:`Streamed` body written as it goes: ``nul_500`` (a
500 whose JSON body holds a NUL byte and bytes that are not UTF-8), ``trickle`` (headers, then
one byte a second, for ever), ``huge`` (a 200 whose completion is ``huge_bytes``, 50 MB by
default, of text, written a megabyte at a time) and ``gzip_bomb`` (``Content-Encoding: gzip``,
about 1 MB on the wire that inflates to ``bomb_bytes``, 1 GB by default).

The Files and Batch API (``/v1/files``, ``/v1/batches``) is tests.llm_batch_desk, reached as
``server.batches``: its batches answer each line by these same rules.

Standalone, for trying the command line against it (README, "Grade your model on
HealthBench"): ``python -m tests.llm_server [--port N] [--api-key KEY]`` serves on 127.0.0.1
until interrupted and prints its base URL.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections import Counter, deque
from http.server import ThreadingHTTPServer

import pytest

from tests.llm_answers import between_sentences, chunk_reply, grader_reply, is_chunk_request, policy_reply
from tests.llm_batch_desk import BatchDesk
from tests.llm_dialects import DIALECTS, rewrite
from tests.llm_handler import Handler as BaseHandler
from tests.llm_hostile import HOSTILE, MB, Streamed, completion_halves, gzip_bomb
from tests.llm_rate_limit import admit
from tests.llm_requests import (
    REASONING_TOKENS,
    RESPONSES_FIELDS,
    is_reasoning,
    responses_messages,
    unsupported,
    wants_schema,
)
from tests.llm_shapes import (
    REFUSAL,
    api_error,
    chat_completion,
    chat_usage,
    content_filter_error,
    cut_to_limit,
    echoed,
    quota_error,
    rate_limit_headers,
    responses_reply,
    responses_usage,
)

FAULT = re.compile(r"fault:(\w+):(\d+)")
KINDS = {
    "429",
    "quota",
    "too_long",
    "content_filter",
    "500",
    "slow",
    "malformed",
    "non_boolean",
    "refusal",
    "verbose",
    "reset",
    "nul_500",
    "trickle",
    "huge",
    "gzip_bomb",
}
MUSING = "Let me weigh this criterion against the reply carefully. " * 21  # about 300 tokens
CACHE_STEP_CHARS = 128 * 4  # OpenAI caches in steps of 128 tokens


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
        echo_key: bool | str = False,
        gateway: bool = False,
        dialect: str = "openai",
        redirect_to: str | None = None,
        send_retry_after: bool = True,
        host: str = "127.0.0.1",
        rpm: int | None = None,
        tpm: int | None = None,
        rate_window: float = 1.0,
    ):
        self.rpm, self.tpm, self.rate_window = rpm or 0, tpm or 0, rate_window
        self.bucket: tuple[float, float, float] | None = None  # requests, tokens, last refill
        self.arrivals: list[tuple[float, int]] = []
        self.latency = latency
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.huge_bytes = 50 * MB
        self.bomb_bytes = 1024 * MB
        self.api_key = api_key
        self.cache_min_tokens = cache_min_tokens
        self.echo_key = echo_key
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}")
        self.dialect = "litellm" if gateway else dialect
        self.redirect_to = redirect_to
        self.send_retry_after = send_retry_after
        self.host = host
        self.prefixes: set[bytes] = set()
        self.authorizations: Counter[str] = Counter()
        self.requests: deque[tuple[str, dict]] = deque(maxlen=200)  # (path, body), the latest
        # (path with its query, headers in lower case) of the latest requests, as received
        self.received: deque[tuple[str, dict[str, str]]] = deque(maxlen=200)
        self.lock = threading.Lock()
        self.queued_faults: deque[str] = deque()
        self.calls = 0
        self.calls_by_prompt: Counter[str] = Counter()
        self.faults_served: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.httpd: ThreadingHTTPServer | None = None
        self.batches = BatchDesk(self._batch_line)

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
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.httpd.server_address[1]}/v1"

    def start(self, port: int = 0) -> LLMServer:
        server = self

        class Handler(BaseHandler):
            owner = server

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in self.host else socket.AF_INET

        self.httpd = Server((self.host, port), Handler, bind_and_activate=False)
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

    def _fault_for(self, prompt: str, key: str) -> tuple[str | None, int]:
        """(the fault this request meets, if any; how many times this very prompt was asked, this time included)."""
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
            return fault, seen

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

    def _cache_writes(self, prompt: str, cached: int) -> int:
        """The tokens this prompt adds to the cache: its cacheable prefix beyond what was served."""
        cacheable = len(prompt.encode()) // CACHE_STEP_CHARS * CACHE_STEP_CHARS // 4
        return cacheable - cached if cacheable >= self.cache_min_tokens else 0

    def no_route(self, path: str) -> object:
        """A 404's body for a path the server does not serve (Ollama's web framework: plain text)."""
        return "404 page not found" if self.dialect == "ollama" else {"error": {"message": f"no route {path}"}}

    def error_reply(self, status: int, body: dict, path: str, model: str) -> tuple[int, object]:
        """(status, payload) of an error as the client receives it: ours, or rewritten in the
        server's dialect (a provider's or a gateway's, tests.llm_dialects)."""
        return rewrite(self.dialect, status, body, path=path, model=model)

    def check_request(self, path: str, body: dict, authorization: str) -> tuple[int, dict, dict] | None:
        """The provider's refusals, before any work: key, model, parameters."""
        with self.lock:
            self.authorizations[authorization] += 1
            self.requests.append((path, body))
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            said = f" {echoed(authorization, self.echo_key)}." if self.echo_key else ""
            return api_error(
                401,
                f"Incorrect API key provided:{said}" if said else "Incorrect API key provided.",
                code="invalid_api_key",
            )
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

    def _batch_line(self, path: str, body: dict, authorization: str) -> tuple[int, dict, dict]:
        """One line of a provider batch, answered as the live endpoint would, without its latency."""
        refusal = self.check_request(path, body, authorization)
        if refusal is not None:
            return refusal
        status, headers, payload = self.answer(body, path, wait=False)
        assert not isinstance(payload, Streamed), "hostile replies are live only"
        return status, headers, payload

    def hostile(self, fault: str) -> Streamed:
        """The body of a hostile fault (HOSTILE)."""
        if fault == "nul_500":
            body = b'{"error": {"message": "upstream broke \x00 here \xff\xfe\xc3( and here", "type": "server_error"}}'
            return Streamed(500, {"Content-Type": "application/json", "Content-Length": str(len(body))}, iter([body]))
        if fault == "trickle":
            return Streamed(
                200, {"Content-Type": "application/json", "Content-Length": "100000"}, iter(lambda: b" ", b""), 1.0
            )
        if fault == "huge":
            head, tail = completion_halves()
            size = len(head) + self.huge_bytes + len(tail)
            pieces = [head, *([b"a" * MB] * (self.huge_bytes // MB)), tail]
            return Streamed(200, {"Content-Type": "application/json", "Content-Length": str(size)}, iter(pieces))
        bomb = gzip_bomb(self.bomb_bytes)
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip", "Content-Length": str(len(bomb))}
        return Streamed(200, headers, iter([bomb[i : i + MB] for i in range(0, len(bomb), MB)]))

    def answer(
        self, body: dict, path: str = "/v1/chat/completions", *, wait: bool = True
    ) -> tuple[int, dict, dict | Streamed]:
        """(status, extra headers, JSON body) for one request; may sleep."""
        responses = path == "/v1/responses"
        messages = responses_messages(body) if responses else body.get("messages") or []
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        model = str(body.get("model", ""))
        fault, asked = self._fault_for(prompt, hashlib.sha256(f"{model}\n{prompt}".encode()).hexdigest())
        limited, limit_headers = admit(self, model, max(1, len(prompt) // 4)) if self.rpm or self.tpm else (None, {})
        if limited is not None:
            return limited
        if self.latency and wait:
            time.sleep(self.latency)
        if fault in HOSTILE:
            return 0, {}, self.hostile(fault)
        if fault == "429":
            _, _, error = api_error(429, "Rate limit reached for requests", kind="requests", code="rate_limit_exceeded")
            headers = rate_limit_headers(requests_left=0, tokens_left=0, reset_seconds=self.retry_after)
            if self.send_retry_after:
                headers["Retry-After"] = f"{self.retry_after:g}"
            return 429, headers, error
        if fault == "quota":
            return quota_error()
        if fault == "too_long":
            return api_error(
                400,
                "This model's maximum context length is 8192 tokens. Please reduce the length of the messages.",
                param="messages",
                code="context_length_exceeded",
            )
        if fault == "content_filter":
            return content_filter_error()
        if fault == "500":
            return api_error(500, "The server had an error", kind="server_error")
        if fault == "slow":
            time.sleep(self.slow_seconds)
        if fault == "reset":
            return 0, {}, {}
        refusal = None
        if model.startswith("policy"):
            content, refusal = policy_reply(messages)
        elif fault == "malformed":
            content = "The response looks fine to me, I would say it meets the criterion."
        elif fault == "non_boolean":
            content = json.dumps({"explanation": "Unsure.", "criteria_met": "yes"})
        elif fault == "refusal":
            content, refusal = "", REFUSAL
        elif fault == "verbose":
            content = MUSING + grader_reply(prompt, structured=True)
        elif fault == "chatty":
            content = between_sentences(grader_reply(prompt, structured=True))
        elif is_chunk_request(body, prompt):
            content = chunk_reply(prompt, structured=wants_schema(body), asked=asked)
        else:
            content = grader_reply(prompt, structured=wants_schema(body), asked=asked)
        reasoning = 0
        if is_reasoning(model):
            effort = (body.get("reasoning") or {}).get("effort", "") if responses else body.get("reasoning_effort", "")
            reasoning = REASONING_TOKENS.get(str(effort or ""), 128)
        limit = (
            body.get("max_output_tokens") if responses else body.get("max_completion_tokens", body.get("max_tokens"))
        )
        content, reasoning, truncated = cut_to_limit(content, reasoning=reasoning, limit=limit)
        prompt_tokens = max(1, len(prompt) // 4)
        cached = self._cached_tokens(prompt)
        writes = self._cache_writes(prompt, cached)
        said = refusal or content
        completion_tokens = (max(1, len(said) // 4) if said else 0) + reasoning
        headers = limit_headers or rate_limit_headers(requests_left=9_999, tokens_left=29_999_000, reset_seconds=0.006)
        if responses:
            usage = responses_usage(prompt_tokens, cached, writes, completion_tokens, reasoning)
            reply = responses_reply(
                body,
                model,
                content=content,
                refusal=refusal,
                truncated=truncated,
                reasoning_item=is_reasoning(model),
                usage=usage,
            )
            return 200, headers, reply
        usage = chat_usage(prompt_tokens, cached, writes, completion_tokens, reasoning)
        return 200, headers, chat_completion(model, content=content, refusal=refusal, truncated=truncated, usage=usage)


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


def serve(argv: list[str] | None = None) -> None:
    """Serve until interrupted (python -m tests.llm_server)."""
    import argparse

    parser = argparse.ArgumentParser(description="A local OpenAI-compatible test server (tests/llm_server.py).")
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--api-key", help="the only bearer token accepted (default: any)")
    options = parser.parse_args(argv)
    server = LLMServer(api_key=options.api_key).start(options.port)
    print(f"serving {server.url} (Ctrl-C stops it)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    serve()
