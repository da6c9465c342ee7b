"""Chat calls to any OpenAI-compatible endpoint, through the ``openai`` package, with our own
retries; and the grader protocol on top (ask, read the verdict, ask again if unreadable).

Faults and what happens:

* 429 (honouring Retry-After / retry-after-ms), 408, 409, 5xx, timeouts, dropped
  connections, a 200 whose body is not a chat completion: retried up to
  ``RetryPolicy.max_attempts`` requests, with exponential backoff and jitter.
* Other 4xx (a bad key, an unknown model): not retried; the call fails at once.
* An answer without a readable verdict: asked again, up to ``RetryPolicy.format_attempts``
  answers. The tokens of every answer count.

The openai client's own retries are off (``max_retries=0``) so that these rules, and the
count of attempts stored with each grade, are ours.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx2
import openai

from grading.pipeline.endpoint import Endpoint
from grading.pipeline.grader_prompt import MalformedAnswer, parse_answer

if TYPE_CHECKING:
    from grading.pipeline.rate_limit import RateLimiter

CHARS_PER_TOKEN = 4  # for estimates and the token bucket, before the endpoint counts them
RETRY_STATUS = {408, 409, 429}


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


@dataclass(frozen=True)
class ChatReply:
    content: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int


class CallFailed(Exception):
    def __init__(self, message: str, *, attempts: int):
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True)
class GradeOutcome:
    """A grade as the grader gave it: met is None when it failed (error says why)."""

    met: bool | None
    explanation: str = ""
    raw_output: str = ""
    error: str = ""
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


# --- the client ---------------------------------------------------------------------------

# Clients belong to the event loop their connections were made on.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, openai.AsyncOpenAI]] = (
    weakref.WeakKeyDictionary()
)


def client_for(endpoint: Endpoint) -> openai.AsyncOpenAI:
    """The endpoint's client on this event loop. It lives as long as the loop, so
    connections are reused across the batches a worker grades."""
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    key = (endpoint.base_url, endpoint.api_key(), endpoint.timeout)
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


def _reply(raw: bytes, attempts: int) -> ChatReply:
    data = json.loads(raw)
    choice = data["choices"][0]
    usage = data.get("usage") or {}
    return ChatReply(
        content=choice["message"].get("content") or "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        attempts=attempts,
    )


async def chat(
    endpoint: Endpoint,
    messages: list[dict],
    *,
    limiter: RateLimiter,
    policy: RetryPolicy = DEFAULT_RETRY,
) -> ChatReply:
    """One chat completion, retried on transport faults; raises CallFailed when it gives up."""
    client = client_for(endpoint)
    body = {
        "model": endpoint.model,
        "messages": messages,
        "temperature": endpoint.temperature,
        "max_tokens": endpoint.max_tokens,
    }
    estimate = sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN + min(endpoint.max_tokens, 256)
    for attempt in range(1, policy.max_attempts + 1):
        await limiter.acquire(endpoint, estimate)
        retry_after = None
        try:
            # client.post instead of chat.completions.create: the typed call's request
            # transform and response model cost about a third of a grade's CPU time, and
            # we read three fields. The openai client still does URL, auth and errors.
            raw = await client.post("/chat/completions", body=body, cast_to=bytes)
            reply = _reply(raw, attempt)
        except openai.APIStatusError as exc:
            await limiter.settle(endpoint, -estimate)
            error = f"HTTP {exc.status_code}: {_message(exc)}"
            if exc.status_code not in RETRY_STATUS and exc.status_code < 500:
                raise CallFailed(error, attempts=attempt) from None
            retry_after = _retry_after(exc.response.headers)
        except openai.APITimeoutError:
            error = f"no answer within {endpoint.timeout:g} s"
        except openai.APIConnectionError as exc:
            error = f"connection failed: {exc.__cause__ or exc}"
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            error = "the endpoint's answer is not a chat completion"
        else:
            await limiter.settle(endpoint, reply.prompt_tokens + reply.completion_tokens - estimate)
            return reply
        if attempt == policy.max_attempts:
            raise CallFailed(f"{error} (gave up after {attempt} attempts)", attempts=attempt)
        delay = policy.backoff(attempt)
        if retry_after is not None:
            # The server said when; a little jitter keeps the workers it told from returning in step.
            delay = min(policy.max_retry_after, retry_after) + random.uniform(0, 0.1 * policy.base_delay)
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
    return str(exc.message)[:300]


async def ask_grader(
    endpoint: Endpoint,
    prompt: str,
    *,
    limiter: RateLimiter,
    policy: RetryPolicy = DEFAULT_RETRY,
) -> GradeOutcome:
    """Ask the grader about one rendered prompt; never raises for the grader's faults."""
    messages = [{"role": "user", "content": prompt}]
    attempts = prompt_tokens = completion_tokens = 0
    problem, raw = "", ""
    for _ in range(policy.format_attempts):
        try:
            reply = await chat(endpoint, messages, limiter=limiter, policy=policy)
        except CallFailed as exc:
            return GradeOutcome(
                met=None,
                error=str(exc),
                raw_output=raw,
                attempts=attempts + exc.attempts,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )
        attempts += reply.attempts
        prompt_tokens += reply.prompt_tokens
        completion_tokens += reply.completion_tokens
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
        )
    return GradeOutcome(
        met=None,
        error=f"unreadable answer {policy.format_attempts} times: {problem}",
        raw_output=raw,
        attempts=attempts,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
