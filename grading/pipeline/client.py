"""Calls to any OpenAI-compatible endpoint, through the ``openai`` package, with our own
retries; and the grader protocol on top (ask, read the verdict, ask again if unreadable).

Requests are shaped per endpoint (grading.pipeline.request_shape), replies are read by
grading.pipeline.replies and error replies by grading.pipeline.provider_errors, which says
what each one means:

* 429 (honouring Retry-After, retry-after-ms, or the x-ratelimit-reset-* headers), 408, 409,
  5xx, timeouts, dropped connections, a 200 whose body is no completion: retried up to
  ``RetryPolicy.max_attempts`` requests, with exponential backoff and jitter.
* *Fatal*, not retried, and the batch's FailureWatch trips so that the run stops with the
  provider's words (grading.pipeline.batches): a refused connection, a host that does not
  resolve, a redirect (never followed: the key stays with the endpoint's own origin),
  401/403/404, an exhausted quota (also as a 429), a 400 that rejects a parameter or the
  model, however a gateway wraps it.
* Other 4xx, and a reply with no text at all (no refusal, not cut off): not retried; that
  one call fails.
* ``FailureWatch.limit`` failures in a row of the same kind: the watch trips too. Every
  failed request counts (a rate limit only when the call gives up on it), and so does every
  grade that fails for its answer (a refusal, an answer cut off, an unreadable one).
* A grader answer without a readable verdict: asked again, up to
  ``RetryPolicy.format_attempts`` answers. One cut off at the output limit: asked once more
  with twice the limit. A refusal: the grade fails, quoting it. The tokens of every answer count.

Provider messages are stored and logged without the endpoint's key (healthbench_web.redact).
The openai client's own retries are off (``max_retries=0``) and so is its following of
redirects, so that these rules, and the count of attempts stored with each grade, are ours.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import socket
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import httpx2
import openai

from grading.pipeline.endpoint import CallTarget
from grading.pipeline.grader_prompt import MalformedAnswer, parse_answer
from grading.pipeline.provider_errors import Action, read_error
from grading.pipeline.replies import EmptyAnswer, NotACompletion, Reply, parse_reply
from grading.pipeline.request_shape import CHARS_PER_TOKEN, GRADE_SCHEMA, GRADE_SCHEMA_NAME, call_request
from grading.pipeline.response_prompt import CHUNK_SCHEMA, CHUNK_SCHEMA_NAME, read_chunk_answer, split_usage
from healthbench_web.redact import redact

if TYPE_CHECKING:
    from grading.pipeline.rate_limit import RateLimiter

__all__ = ["CHARS_PER_TOKEN", "ChatReply"]
REFUSAL_QUOTE_CHARS = 300


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
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311 - jitter, not a secret


DEFAULT_RETRY = RetryPolicy()
ChatReply = Reply  # the name callers knew; a reply of either API style


class CallFailed(Exception):
    def __init__(self, message: str, *, attempts: int, fatal: bool = False):
        super().__init__(message)
        self.attempts = attempts
        self.fatal = fatal


class FailureWatch:
    """One batch's view of its endpoint's health, shared by all its calls (on one event
    loop, so no lock). It trips on a fatal fault, or on `limit` failures in a row of the
    same kind; then every call of the batch fails at once with its reason."""

    def __init__(self, limit: int, *, on_trip: Callable[[], None] | None = None):
        self.limit = limit
        self.on_trip = on_trip
        self.reason: str | None = None
        self.streak = 0
        self.last_kind = ""

    def trip(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            if self.on_trip is not None:
                self.on_trip()

    def failed(self, error: str, kind: str = "") -> None:
        """A failure; `kind` names what makes two failures the same (default: the words)."""
        kind = kind or error
        self.streak = self.streak + 1 if kind == self.last_kind else 1
        self.last_kind = kind
        if self.streak >= self.limit:
            self.trip(f"{self.streak} calls in a row failed: {error}")

    def succeeded(self) -> None:
        self.streak, self.last_kind = 0, ""


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
    cache_write_tokens: int = 0
    fatal: bool = False
    # Per-response mode: this criterion's entry was missing or unusable, and it was graded
    # by a per-criterion call of its own.
    fallback: bool = False
    mode: str = ""  # of a stored grade reused from the cache: how it was asked


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
                # A redirect would re-send the whole prompt (and, to the same origin, the
                # key) to an address nobody checked: it is a failed call instead.
                follow_redirects=False,
            ),
        )
    return clients[key]


async def close_clients() -> None:
    """Close this event loop's clients (a loop that ends, as in tests)."""
    for client in _clients.pop(asyncio.get_running_loop(), {}).values():
        await client.close()


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(value: str) -> float | None:
    """OpenAI's reset durations: "1s", "6m0s", "20ms", "1h2m3.5s"."""
    parts = _DURATION.findall(value.strip())
    if not parts or "".join(n + u for n, u in parts) != value.strip():
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _retry_after(headers: httpx2.Headers) -> float | None:
    if value := headers.get("retry-after-ms"):
        try:
            return float(value) / 1000
        except ValueError:
            pass
    if value := headers.get("retry-after"):
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            if when is not None:
                return max(0.0, when.timestamp() - time.time())
    # No Retry-After: the limit that ran out says when it refills.
    waits = [
        _duration(headers.get(f"x-ratelimit-reset-{what}") or "")
        for what in ("requests", "tokens")
        if headers.get(f"x-ratelimit-remaining-{what}") == "0"
    ]
    known = [wait for wait in waits if wait is not None]
    return max(known) if known else None


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


def _keys(endpoint: CallTarget) -> list[str]:
    try:
        return [endpoint.api_key()] if endpoint.api_key_env else []
    except Exception:  # no key, nothing to remove
        return []


@dataclass(frozen=True)
class _Failure:
    error: str  # what the grade or the run will say
    kind: str  # what makes two failures the same, for the streak
    action: Action
    retry_after: float | None = None


def _status_failure(exc: openai.APIStatusError, endpoint: CallTarget) -> _Failure:
    headers = exc.response.headers
    problem = read_error(
        exc.status_code, exc.body, text=_body_text(exc.response), location=headers.get("location") or ""
    )
    return _Failure(
        error=redact(problem.describe(endpoint.name or endpoint.model), _keys(endpoint)),
        kind=problem.kind,
        action=problem.action(),
        retry_after=_retry_after(headers),
    )


def _body_text(response: httpx2.Response) -> str:
    try:
        return response.text[:2000]
    except Exception:  # a body that cannot be read says nothing
        return ""


def _transport_failure(exc: openai.APIConnectionError, endpoint: CallTarget) -> _Failure:
    fault = _transport_fault(exc, endpoint)
    if fault is not None:
        error, fatal = fault
        return _Failure(error, "refused or unresolved", Action.FATAL if fatal else Action.RETRY)
    if isinstance(exc, openai.APITimeoutError):
        return _Failure(f"no answer within {endpoint.timeout:g} s", "timeout", Action.RETRY)
    words = redact(f"connection failed: {exc.__cause__ or exc}", _keys(endpoint))
    return _Failure(words, "connection failed", Action.RETRY)


async def chat(
    endpoint: CallTarget,
    messages: list[dict],
    *,
    limiter: RateLimiter,
    policy: RetryPolicy = DEFAULT_RETRY,
    watch: FailureWatch | None = None,
    schema: dict | None = None,
    schema_name: str = GRADE_SCHEMA_NAME,
    max_tokens: int | None = None,
) -> Reply:
    """One completion (Chat Completions or Responses, as the endpoint says), retried on
    transport faults; raises CallFailed when it gives up, fatal when the run cannot work.

    A reply is not yet a success: the caller tells the watch once it knows whether the
    answer is of use (a grader's verdict read, a sample stored)."""
    client = client_for(endpoint)
    limit = max_tokens or endpoint.max_tokens
    path, body = call_request(endpoint, messages, schema=schema, schema_name=schema_name, max_tokens=limit)
    chars = sum(len(m["content"]) for m in messages) + len(endpoint.system_message)
    estimate = chars // CHARS_PER_TOKEN + min(limit or 256, 256)
    for attempt in range(1, policy.max_attempts + 1):
        if watch is not None and watch.reason is not None:
            raise CallFailed(watch.reason, attempts=attempt - 1, fatal=True)
        await limiter.acquire(endpoint, estimate)
        try:
            # client.post instead of the typed create(): the typed call's request
            # transform and response model cost about a third of a grade's CPU time, and
            # we read a few fields. The openai client still does URL, auth and errors.
            raw = await client.post(path, body=body, cast_to=bytes)
            reply = parse_reply(raw, api_style=endpoint.api_style, attempts=attempt)
        except openai.APIStatusError as exc:
            await limiter.settle(endpoint, -estimate)
            failure = _status_failure(exc, endpoint)
        except openai.APIConnectionError as exc:  # timeouts included
            failure = _transport_failure(exc, endpoint)
        except EmptyAnswer as exc:
            failure = _Failure(f"the endpoint's answer is empty: {exc}", "empty answer", Action.FAIL)
        except NotACompletion as exc:
            failure = _Failure(
                redact(f"the endpoint's answer is not a completion: {exc}", _keys(endpoint)),
                "not a completion",
                Action.RETRY,
            )
        else:
            await limiter.settle(endpoint, reply.prompt_tokens + reply.completion_tokens - estimate)
            return reply
        if failure.action is Action.FATAL:
            if watch is not None:
                watch.trip(failure.error)
            raise CallFailed(failure.error, attempts=attempt, fatal=True)
        last = attempt == policy.max_attempts or failure.action is Action.FAIL
        if watch is not None and (failure.action is not Action.RETRY_UNCOUNTED or last):
            # A rate limit counts only when the call gives up on it: a run whose every call
            # is turned away still stops within the streak.
            watch.failed(failure.error, failure.kind)
            if watch.reason is not None:
                raise CallFailed(watch.reason, attempts=attempt, fatal=True)
        if failure.action is Action.FAIL:
            raise CallFailed(failure.error, attempts=attempt)
        if last:
            raise CallFailed(f"{failure.error} (gave up after {attempt} attempts)", attempts=attempt)
        delay = policy.backoff(attempt)
        if failure.retry_after is not None:
            # The server said when; a little jitter keeps the workers it told from returning in step.
            delay = min(policy.max_retry_after, failure.retry_after) + random.uniform(0, 0.1 * policy.base_delay)  # noqa: S311 - jitter
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")


@dataclass
class _Spent:
    """What the answers to one grade cost, added up."""

    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, reply: Reply) -> None:
        self.attempts += reply.attempts
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.cached_tokens += reply.cached_tokens
        self.reasoning_tokens += reply.reasoning_tokens
        self.cache_write_tokens += reply.cache_write_tokens

    def outcome(self, **fields) -> GradeOutcome:
        return GradeOutcome(
            attempts=self.attempts,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens,
            reasoning_tokens=self.reasoning_tokens,
            cache_write_tokens=self.cache_write_tokens,
            **fields,
        )


def _quote(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > REFUSAL_QUOTE_CHARS:
        text = text[: REFUSAL_QUOTE_CHARS - 1] + "…"
    return f"“{text}”" if text else "(no words given)"


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
    spent = _Spent()
    limit = endpoint.max_tokens
    problem, raw = "", ""
    answers = 0
    while answers < policy.format_attempts:
        try:
            reply = await chat(
                endpoint, messages, limiter=limiter, policy=policy, watch=watch, schema=schema, max_tokens=limit
            )
        except CallFailed as exc:
            failed = spent.outcome(met=None, error=str(exc), raw_output=raw, fatal=exc.fatal)
            return replace(failed, attempts=spent.attempts + exc.attempts)
        spent.add(reply)
        raw = reply.content
        if reply.refused:
            return _failed(spent, watch, f"the grader refused: {_quote(reply.content)}", "grader refused", raw)
        if reply.truncated:
            if limit is not None and limit == endpoint.max_tokens:
                limit = limit * 2  # once, with room to finish
                continue
            at = f"{limit} output tokens" if limit is not None else "the model's own output limit"
            return _failed(spent, watch, f"the grader's answer was cut off at {at}", "cut off", raw)
        answers += 1
        try:
            answer = parse_answer(reply.content)
        except MalformedAnswer as exc:
            problem = str(exc)
            continue
        if watch is not None:
            watch.succeeded()
        return spent.outcome(met=answer.met, explanation=answer.explanation, raw_output=raw)
    return _failed(spent, watch, f"unreadable answer {policy.format_attempts} times: {problem}", "unreadable", raw)


async def ask_grader_chunk(
    endpoint: CallTarget,
    prompt: str,
    n: int,
    fallback_prompt: Callable[[int], str],
    *,
    limiter: RateLimiter,
    policy: RetryPolicy = DEFAULT_RETRY,
    watch: FailureWatch | None = None,
) -> list[GradeOutcome]:
    """Ask the grader about a chunk of `n` criteria of one response (a per-response prompt,
    grading.pipeline.response_prompt); one outcome per criterion, in order. Never raises for
    the grader's faults.

    The chunk's answer follows the per-criterion rules: a failed call, a refusal, an answer
    cut off twice or unreadable `format_attempts` times fails every criterion of the chunk
    (missing, never "not met"). A readable answer whose entry for a criterion is missing,
    repeated or not a boolean leaves that criterion to a per-criterion call of its own
    (`fallback_prompt(index)`, index from 0), made in this same lane, so the run's
    concurrency bound holds. The chunk's tokens are shared among its criteria and its
    requests counted on the first, so the run's sums are what the provider billed."""
    messages = [{"role": "user", "content": prompt}]
    schema = CHUNK_SCHEMA if endpoint.structured_output else None
    spent = _Spent()
    limit = endpoint.max_tokens
    problem, raw = "", ""
    answers = 0
    failure: GradeOutcome | None = None
    chunk = None
    while answers < policy.format_attempts:
        try:
            reply = await chat(
                endpoint,
                messages,
                limiter=limiter,
                policy=policy,
                watch=watch,
                schema=schema,
                schema_name=CHUNK_SCHEMA_NAME,
                max_tokens=limit,
            )
        except CallFailed as exc:
            failure = spent.outcome(met=None, error=str(exc), raw_output=raw, fatal=exc.fatal)
            failure = replace(failure, attempts=spent.attempts + exc.attempts)
            break
        spent.add(reply)
        raw = reply.content
        if reply.refused:
            failure = _failed(spent, watch, f"the grader refused: {_quote(reply.content)}", "grader refused", raw)
            break
        if reply.truncated:
            if limit is not None and limit == endpoint.max_tokens:
                limit = limit * 2
                continue
            at = f"{limit} output tokens" if limit is not None else "the model's own output limit"
            failure = _failed(spent, watch, f"the grader's answer was cut off at {at}", "cut off", raw)
            break
        answers += 1
        try:
            chunk = read_chunk_answer(reply.content, n)
        except MalformedAnswer as exc:
            problem = str(exc)
            continue
        break
    if chunk is None and failure is None:
        failure = _failed(
            spent, watch, f"unreadable answer {policy.format_attempts} times: {problem}", "unreadable", raw
        )
    if failure is not None or chunk is None:
        return _shared(failure or spent.outcome(met=None, error="no answer"), n)
    if watch is not None:
        watch.succeeded()
    entries = chunk.entries or {}
    base = [
        spent.outcome(met=a.met, explanation=a.explanation, raw_output=entries.get(i, raw))
        if (a := chunk.verdicts.get(i)) is not None
        else None
        for i in range(1, n + 1)
    ]
    shared = _shared(spent.outcome(met=None), n)
    outcomes: list[GradeOutcome] = []
    for index in range(n):
        own = base[index]
        if own is None:
            own = replace(
                await ask_grader(endpoint, fallback_prompt(index), limiter=limiter, policy=policy, watch=watch),
                fallback=True,
            )
            # The chunk's share of this criterion comes on top of its own call.
            outcomes.append(_plus(own, shared[index]))
        else:
            outcomes.append(
                replace(
                    own,
                    attempts=shared[index].attempts,
                    prompt_tokens=shared[index].prompt_tokens,
                    completion_tokens=shared[index].completion_tokens,
                    cached_tokens=shared[index].cached_tokens,
                    reasoning_tokens=shared[index].reasoning_tokens,
                    cache_write_tokens=shared[index].cache_write_tokens,
                )
            )
    return outcomes


_USAGE = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens", "cache_write_tokens")


def _shared(outcome: GradeOutcome, n: int) -> list[GradeOutcome]:
    """`n` copies of one call's outcome, its tokens split among them and its requests on the first."""
    splits = {name: split_usage(getattr(outcome, name), n) for name in _USAGE}
    shares: list[dict[str, Any]] = [{name: splits[name][k] for name in _USAGE} for k in range(n)]
    return [replace(outcome, attempts=outcome.attempts if k == 0 else 0, **shares[k]) for k in range(n)]


def _plus(outcome: GradeOutcome, extra: GradeOutcome) -> GradeOutcome:
    sums: dict[str, Any] = {name: getattr(outcome, name) + getattr(extra, name) for name in _USAGE}
    return replace(outcome, attempts=outcome.attempts + extra.attempts, **sums)


def _failed(spent: _Spent, watch: FailureWatch | None, error: str, kind: str, raw: str) -> GradeOutcome:
    """A grade that failed for its answer: counted by the watch like any failure."""
    if watch is not None:
        watch.failed(error, kind)
        if watch.reason is not None:  # this one made the streak: the run stops on it
            return spent.outcome(met=None, error=watch.reason, raw_output=raw, fatal=True)
    return spent.outcome(met=None, error=error, raw_output=raw)
