"""Calls to any OpenAI-compatible endpoint, through the ``openai`` package, with our own
retries; and the grader protocol on top (ask, read the verdict, ask again if unreadable).

Requests are shaped per endpoint (grading.pipeline.request_shape): Chat Completions or the
Responses API; reasoning models get ``max_completion_tokens`` / ``max_output_tokens`` and
``reasoning_effort`` and never ``temperature``; a strict JSON schema for the grader's answer
where the endpoint supports it.

Faults and what happens:

* 429 (honouring Retry-After / retry-after-ms), 408, 409, 5xx, timeouts, dropped
  connections, a 200 whose body is not a completion: retried up to
  ``RetryPolicy.max_attempts`` requests, with exponential backoff and jitter.
* A refused connection, a host that does not resolve, 401/403/404 (a bad key, an unknown
  model) and a 400 that rejects the request's shape: *fatal*. Not retried; the batch's
  FailureWatch trips and the run stops with that reason (grading.pipeline.batches).
* Other 4xx: not retried; that one call fails.
* ``FailureWatch.limit`` failed requests in a row with the same error (429s aside): the
  watch trips too, so that an outage fails the run in seconds instead of grinding on.
* An answer without a readable verdict: asked again, up to ``RetryPolicy.format_attempts``
  answers. The tokens of every answer count.

The openai client's own retries are off (``max_retries=0``) so that these rules, and the
count of attempts stored with each grade, are ours.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import socket
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx2
import openai

from grading.pipeline.endpoint import CallTarget
from grading.pipeline.grader_prompt import MalformedAnswer, parse_answer
from grading.pipeline.request_shape import CHARS_PER_TOKEN, GRADE_SCHEMA, Reply, parse_reply, request_body

if TYPE_CHECKING:
    from grading.pipeline.rate_limit import RateLimiter

RETRY_STATUS = {408, 409, 429}
FATAL_STATUS = {401, 403, 404}
# A 400 with one of these codes rejects the request's shape or the model itself: every
# other call of the run would get the same answer.
FATAL_CODES = {
    "unsupported_parameter", "unsupported_value", "unknown_parameter", "invalid_api_key", "model_not_found",
}  # fmt: skip
__all__ = ["CHARS_PER_TOKEN", "ChatReply"]


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6  # requests per answer, on transport faults
    format_attempts: int = 3  # answers per grade, on unreadable answers
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_retry_after: float = 300.0

    def backoff(self, attempt: int) -> float:
        """Exponential, with "equal jitter": half fixed, half random, so that workers that
        failed together do not come back together, yet none retries at once."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


DEFAULT_RETRY = RetryPolicy()
ChatReply = Reply  # the name callers knew; a reply of either API style


class CallFailed(Exception):
    def __init__(self, message: str, *, attempts: int, fatal: bool = False):
        super().__init__(message)
        self.attempts = attempts
        self.fatal = fatal


class FailureWatch:
    """One batch's view of its endpoint's health, shared by all its calls (on one event
    loop, so no lock). It trips on a fatal fault, or on `limit` failed requests in a row
    with the same error; then every call of the batch fails at once with its reason."""

    def __init__(self, limit: int, *, on_trip: Callable[[], None] | None = None):
        self.limit = limit
        self.on_trip = on_trip
        self.reason: str | None = None
        self.streak = 0
        self.last_error = ""

    def trip(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            if self.on_trip is not None:
                self.on_trip()

    def failed(self, error: str) -> None:
        self.streak = self.streak + 1 if error == self.last_error else 1
        self.last_error = error
        if self.streak >= self.limit:
            self.trip(f"{self.streak} calls in a row failed: {error}")

    def succeeded(self) -> None:
        self.streak, self.last_error = 0, ""


@dataclass(frozen=True)
class GradeOutcome:
    """A grade as the grader gave it: met is None when it failed (error says why). A fatal
    outcome is the run's failure, not the item's: it is not stored, so a resume grades it."""

    met: bool | None
    explanation: str = ""
    raw_output: str = ""
    error: str = ""
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    fatal: bool = False


# --- the client ---------------------------------------------------------------------------

# Clients belong to the event loop their connections were made on.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, openai.AsyncOpenAI]] = (
    weakref.WeakKeyDictionary()
)


def client_for(endpoint: CallTarget) -> openai.AsyncOpenAI:
    """The endpoint's client on this event loop. It lives as long as the loop, so
    connections are reused across the batches a worker grades. The key is read (and its
    variable checked against the allowlist) when the client is made."""
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    key = (endpoint.base_url, endpoint.api_key_env, endpoint.timeout)
    if key not in clients:
        clients[key] = openai.AsyncOpenAI(
            base_url=endpoint.base_url or None,
            api_key=endpoint.api_key(),
            timeout=endpoint.timeout,
            max_retries=0,
            # The openai package's aiohttp transport (the "aiohttp" extra): it spends about
            # a third less CPU per call than the default httpx one, whose connection pool
            # also looks through every connection for each request.
            http_client=openai.DefaultAioHttpClient(
                limits=httpx2.Limits(max_connections=2000, max_keepalive_connections=2000),
                timeout=endpoint.timeout,
            ),
        )
    return clients[key]


async def close_clients() -> None:
    """Close this event loop's clients (a loop that ends, as in tests)."""
    for client in _clients.pop(asyncio.get_running_loop(), {}).values():
        await client.close()


def _retry_after(headers: httpx2.Headers) -> float | None:
    if value := headers.get("retry-after-ms"):
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when else None


def _transport_fault(exc: BaseException, endpoint: CallTarget) -> tuple[str, bool] | None:
    """(the transport's words, fatal) for a refused connection or a host that does not
    resolve, found anywhere in the exception's chain (the aiohttp transport reports both
    as a connect timeout), else None."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return f"connection refused by {endpoint.base_url or 'the OpenAI API'} ({cause})", True
        if isinstance(cause, socket.gaierror):
            return f"could not resolve the host of {endpoint.base_url or 'the OpenAI API'} ({cause})", True
        cause = cause.__cause__ or cause.__context__
    return None


async def chat(
    endpoint: CallTarget,
    messages: list[dict],
    *,
    limiter: RateLimiter,
    policy: RetryPolicy = DEFAULT_RETRY,
    watch: FailureWatch | None = None,
    schema: dict | None = None,
) -> Reply:
    """One completion (Chat Completions or Responses, as the endpoint says), retried on
    transport faults; raises CallFailed when it gives up, fatal when the run cannot work."""
    client = client_for(endpoint)
    path, body = request_body(
        api_style=endpoint.api_style,
        model=endpoint.model,
        messages=messages,
        max_tokens=endpoint.max_tokens,
        temperature=endpoint.temperature,
        reasoning=endpoint.reasoning,
        reasoning_effort=endpoint.reasoning_effort,
        schema=schema,
    )
    estimate = sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN + min(endpoint.max_tokens, 256)
    for attempt in range(1, policy.max_attempts + 1):
        if watch is not None and watch.reason is not None:
            raise CallFailed(watch.reason, attempts=attempt - 1, fatal=True)
        await limiter.acquire(endpoint, estimate)
        retry_after = None
        fatal = counted = False
        try:
            # client.post instead of the typed create(): the typed call's request
            # transform and response model cost about a third of a grade's CPU time, and
            # we read a few fields. The openai client still does URL, auth and errors.
            raw = await client.post(path, body=body, cast_to=bytes)
            reply = parse_reply(raw, api_style=endpoint.api_style, attempts=attempt)
        except openai.APIStatusError as exc:
            await limiter.settle(endpoint, -estimate)
            error = f"HTTP {exc.status_code} from {endpoint.name or endpoint.model}: {_message(exc)}"
            fatal = exc.status_code in FATAL_STATUS or _code(exc) in FATAL_CODES
            counted = exc.status_code != 429  # being asked to slow down is no fault of the endpoint
            if fatal or (exc.status_code not in RETRY_STATUS and exc.status_code < 500):
                if fatal and watch is not None:
                    watch.trip(error)
                raise CallFailed(error, attempts=attempt, fatal=fatal) from None
            retry_after = _retry_after(exc.response.headers)
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            fault = _transport_fault(exc, endpoint)
            if fault is not None:
                error, fatal = fault
            elif isinstance(exc, openai.APITimeoutError):
                error = f"no answer within {endpoint.timeout:g} s"
            else:
                error = f"connection failed: {exc.__cause__ or exc}"
            counted = True
        except ValueError:  # NotACompletion
            error = "the endpoint's answer is not a completion"
            counted = True
        else:
            await limiter.settle(endpoint, reply.prompt_tokens + reply.completion_tokens - estimate)
            if watch is not None:
                watch.succeeded()
            return reply
        if fatal:
            if watch is not None:
                watch.trip(error)
            raise CallFailed(error, attempts=attempt, fatal=True)
        if watch is not None:
            if counted:
                watch.failed(error)
            if watch.reason is not None:
                raise CallFailed(watch.reason, attempts=attempt, fatal=True)
        if attempt == policy.max_attempts:
            raise CallFailed(f"{error} (gave up after {attempt} attempts)", attempts=attempt)
        delay = policy.backoff(attempt)
        if retry_after is not None:
            # The server said when; a little jitter keeps the workers it told from returning in step.
            delay = min(policy.max_retry_after, retry_after) + random.uniform(0, 0.1 * policy.base_delay)
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def _error_body(exc: openai.APIStatusError) -> dict:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return error
    return {}


def _code(exc: openai.APIStatusError) -> str:
    return str(_error_body(exc).get("code") or "")


def _message(exc: openai.APIStatusError) -> str:
    error = _error_body(exc)
    if error.get("message"):
        return str(error["message"])[:300]
    return str(exc.message)[:300]


async def ask_grader(
    endpoint: CallTarget,
    prompt: str,
    *,
    limiter: RateLimiter,
    policy: RetryPolicy = DEFAULT_RETRY,
    watch: FailureWatch | None = None,
) -> GradeOutcome:
    """Ask the grader about one rendered prompt; never raises for the grader's faults."""
    messages = [{"role": "user", "content": prompt}]
    schema = GRADE_SCHEMA if endpoint.structured_output else None
    attempts = prompt_tokens = completion_tokens = cached_tokens = reasoning_tokens = 0
    problem, raw = "", ""
    for _ in range(policy.format_attempts):
        try:
            reply = await chat(endpoint, messages, limiter=limiter, policy=policy, watch=watch, schema=schema)
        except CallFailed as exc:
            return GradeOutcome(
                met=None,
                error=str(exc),
                raw_output=raw,
                attempts=attempts + exc.attempts,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cached_tokens=cached_tokens,
                reasoning_tokens=reasoning_tokens,
                fatal=exc.fatal,
            )
        attempts += reply.attempts
        prompt_tokens += reply.prompt_tokens
        completion_tokens += reply.completion_tokens
        cached_tokens += reply.cached_tokens
        reasoning_tokens += reply.reasoning_tokens
        raw = reply.content
        try:
            answer = parse_answer(reply.content)
        except MalformedAnswer as exc:
            problem = str(exc)
            continue
        return GradeOutcome(
            met=answer.met,
            explanation=answer.explanation,
            raw_output=raw,
            attempts=attempts,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            reasoning_tokens=reasoning_tokens,
        )
    return GradeOutcome(
        met=None,
        error=f"unreadable answer {policy.format_attempts} times: {problem}",
        raw_output=raw,
        attempts=attempts,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_tokens=cached_tokens,
        reasoning_tokens=reasoning_tokens,
    )
