"""Calls to any OpenAI-compatible endpoint, through the ``openai`` package, with our own
retries; and the grader protocol on top (ask, read the verdict, ask again if unreadable).

Requests are shaped per endpoint (grading.pipeline.request_shape), replies are read by
grading.pipeline.replies and error replies by grading.pipeline.provider_errors, which says
what each one means:

* 429 (honouring Retry-After, retry-after-ms, or the x-ratelimit-reset-* headers), 408, 409,
  5xx, timeouts, dropped connections, a 200 whose body is no completion: retried up to
  ``RetryPolicy.max_attempts`` requests, with exponential backoff and jitter. A wait the
  provider gives holds the whole run, not only the call, and the limits it states in
  x-ratelimit-limit-* become the run's pace (grading.pipeline.rate_limit, ``slow_down``).
* *Fatal*, not retried, and the batch's FailureWatch trips so that the run stops with the
  provider's words (grading.pipeline.batches): a refused connection, a host that does not
  resolve, a redirect (never followed: the key stays with the endpoint's own origin),
  401/403/404, an exhausted quota (also as a 429), a 400 that rejects a parameter or the
  model, however a gateway wraps it.
* An error sent with HTTP 200 (OpenRouter's way with an upstream failure): read as the
  status it names, by the same rules.
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
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import openai

from grading.pipeline.call_failures import (
    Failure,
    endpoint_keys,
    error_reply_failure,
    status_failure,
    transport_failure,
)
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.endpoint_clients import LiveClient, client_for, close_clients
from grading.pipeline.grader_prompt import MalformedAnswer, parse_answer
from grading.pipeline.provider_errors import UNGRADABLE, Action
from grading.pipeline.replies import EmptyAnswer, ErrorReply, NotACompletion, Reply, parse_reply
from grading.pipeline.request_shape import CHARS_PER_TOKEN, GRADE_SCHEMA, GRADE_SCHEMA_NAME, call_request
from grading.pipeline.response_prompt import CHUNK_SCHEMA, CHUNK_SCHEMA_NAME, read_chunk_answer, split_usage
from healthbench_web.redact import redact

if TYPE_CHECKING:
    from grading.pipeline.rate_limit import RateLimiter

__all__ = ["CHARS_PER_TOKEN", "ChatReply", "client_for", "close_clients"]
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
    same kind; then every call of the batch fails at once with its reason.

    A failure that belongs to what is graded, not to the endpoint (a content filter, a prompt
    over the context length), is its subject's: it counts once per subject (a response under
    grading), and the subject's other calls fail with it unsent (`ungradable`)."""

    def __init__(self, limit: int, *, on_trip: Callable[[], None] | None = None):
        self.limit = limit
        self.on_trip = on_trip
        self.reason: str | None = None
        self.streak = 0
        self.last_kind = ""
        self.ungradable: dict[str, str] = {}  # subject -> why no call about it can succeed

    def trip(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            if self.on_trip is not None:
                self.on_trip()

    def failed(self, error: str, kind: str = "", *, subject: str = "") -> None:
        """A failure; `kind` names what makes two failures the same (default: the words);
        `subject`, when the failure is that subject's alone."""
        if subject:
            if subject in self.ungradable:
                return
            self.ungradable[subject] = error
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


# --- the client: grading.pipeline.endpoint_clients ----------------------------------------


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
    subject: str = "",
) -> Reply:
    """One completion (Chat Completions or Responses, as the endpoint says), retried on
    transport faults; raises CallFailed when it gives up, fatal when the run cannot work.
    `subject` names what the call is about (a response under grading): once a call about it
    fails in a way no call about it can escape (a content filter, the context length), the
    others fail with that reason, unsent.

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
        if watch is not None and subject in watch.ungradable:
            raise CallFailed(watch.ungradable[subject], attempts=attempt - 1)
        await limiter.acquire(endpoint, estimate)
        outcome = await _attempt(client, endpoint, path, body, attempt=attempt, limiter=limiter, estimate=estimate)
        if isinstance(outcome, Reply):
            return outcome
        failure = outcome
        if failure.action is Action.FATAL:
            if watch is not None:
                watch.trip(failure.error)
            raise CallFailed(failure.error, attempts=attempt, fatal=True)
        if failure.conversation_bound and failure.action is Action.FAIL:
            failure = replace(failure, error=UNGRADABLE + failure.error)
        last = attempt == policy.max_attempts or failure.action is Action.FAIL
        if watch is not None and (failure.action is not Action.RETRY_UNCOUNTED or last):
            # A rate limit counts only when the call gives up on it: a run whose every call
            # is turned away still stops within the streak.
            bound = subject if failure.conversation_bound and failure.action is Action.FAIL else ""
            watch.failed(failure.error, failure.kind, subject=bound)
            if watch.reason is not None:
                raise CallFailed(watch.reason, attempts=attempt, fatal=True)
        if failure.action is Action.FAIL:
            raise CallFailed(failure.error, attempts=attempt)
        if last:
            raise CallFailed(f"{failure.error} (gave up after {attempt} attempts)", attempts=attempt)
        if failure.retry_after is not None:
            # The server said when: it holds every call of the run (the shared limiter), and
            # this one waits in acquire() with the others, which resume spread out and at the
            # pace the provider stated, not in a burst it would refuse again.
            await limiter.slow_down(
                endpoint,
                seconds=min(policy.max_retry_after, failure.retry_after),
                requests_per_minute=failure.stated[0],
                tokens_per_minute=failure.stated[1],
            )
            continue
        await asyncio.sleep(policy.backoff(attempt))
    raise AssertionError("unreachable")


async def _attempt(
    client: LiveClient,
    endpoint: CallTarget,
    path: str,
    body: dict,
    *,
    attempt: int,
    limiter: RateLimiter,
    estimate: int,
) -> Reply | Failure:
    """One request of a call: its reply, or what went wrong (the limiter settled either way)."""
    try:
        # Not the typed create(): its request transform and response model cost about
        # a third of a grade's CPU time, and we read a few fields (LiveClient).
        sent = await client.post(path, body)
        reply = parse_reply(sent.content, api_style=endpoint.api_style, attempts=attempt)
    except openai.APIStatusError as exc:
        await limiter.settle(endpoint, -estimate)
        return status_failure(exc, endpoint)
    except openai.APIConnectionError as exc:  # timeouts included
        return transport_failure(exc, endpoint)
    except ErrorReply as exc:
        await limiter.settle(endpoint, -estimate)
        return error_reply_failure(exc, endpoint)
    except EmptyAnswer as exc:
        return Failure(f"the endpoint's answer is empty: {exc}", "empty answer", Action.FAIL)
    except NotACompletion as exc:
        return Failure(
            redact(f"the endpoint's answer is not a completion: {exc}", endpoint_keys(endpoint)),
            "not a completion",
            Action.RETRY,
        )
    await limiter.settle(endpoint, reply.prompt_tokens + reply.completion_tokens - estimate)
    return reply


# The token counts of a reply, of a grade's outcome and of what a grade spent, by one name each.
_USAGE = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens", "cache_write_tokens")


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
        for name in _USAGE:
            setattr(self, name, getattr(self, name) + getattr(reply, name))

    def outcome(self, **fields) -> GradeOutcome:
        return GradeOutcome(attempts=self.attempts, **_usage(self), **fields)


def _usage(source: Any) -> dict[str, Any]:
    return {name: getattr(source, name) for name in _USAGE}


def _quote(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > REFUSAL_QUOTE_CHARS:
        text = text[: REFUSAL_QUOTE_CHARS - 1] + "…"
    return f"“{text}”" if text else "(no words given)"


T = TypeVar("T")


@dataclass
class _Asked(Generic[T]):
    """Where the ask/retry loop ended: a read answer, or the outcome of a grade that failed."""

    answer: T | None
    failure: GradeOutcome | None
    spent: _Spent
    raw: str


def _refusal(reply: Reply) -> str:
    if reply.filtered and not reply.content.strip():
        return "the provider's content filter withheld the grader's answer (finish reason content_filter)"
    return f"the grader refused: {_quote(reply.content)}"


async def _ask_until_read(
    endpoint: CallTarget,
    prompt: str,
    read: Callable[[str], T],
    *,
    schema: dict | None,
    schema_name: str,
    limiter: RateLimiter,
    policy: RetryPolicy,
    watch: FailureWatch | None,
    subject: str = "",
) -> _Asked[T]:
    """The one ask/retry loop of a grader call (per criterion and per response alike): ask,
    ask again once with twice the output limit when the answer was cut off at the endpoint's,
    and ask again up to `format_attempts` answers while `read` finds it malformed. A failed
    call, a refusal, a second cut-off or too many unreadable answers end it with a failure,
    counted by the watch; a read answer is not yet told to the watch (the caller knows when
    the grade is of use)."""
    messages = [{"role": "user", "content": prompt}]
    spent = _Spent()
    limit = endpoint.max_tokens
    problem, raw = "", ""
    answers = 0
    while answers < policy.format_attempts:
        try:
            reply = await chat(
                endpoint,
                messages,
                limiter=limiter,
                policy=policy,
                watch=watch,
                schema=schema,
                schema_name=schema_name,
                max_tokens=limit,
                subject=subject,
            )
        except CallFailed as exc:
            failed = spent.outcome(met=None, error=str(exc), raw_output=raw, fatal=exc.fatal)
            return _Asked(None, replace(failed, attempts=spent.attempts + exc.attempts), spent, raw)
        spent.add(reply)
        raw = reply.content
        if reply.refused:
            refused = _failed(spent, watch, _refusal(reply), "grader refused", raw)
            return _Asked(None, refused, spent, raw)
        if reply.truncated:
            if limit is not None and limit == endpoint.max_tokens:
                limit = limit * 2  # once, with room to finish
                continue
            at = f"{limit} output tokens" if limit is not None else "the model's own output limit"
            return _Asked(
                None, _failed(spent, watch, f"the grader's answer was cut off at {at}", "cut off", raw), spent, raw
            )
        answers += 1
        try:
            return _Asked(read(reply.content), None, spent, raw)
        except MalformedAnswer as exc:
            problem = str(exc)
    unreadable = _failed(
        spent, watch, f"unreadable answer {policy.format_attempts} times: {problem}", "unreadable", raw
    )
    return _Asked(None, unreadable, spent, raw)


async def ask_grader(
    endpoint: CallTarget,
    prompt: str,
    *,
    limiter: RateLimiter,
    policy: RetryPolicy = DEFAULT_RETRY,
    watch: FailureWatch | None = None,
    subject: str = "",
) -> GradeOutcome:
    """Ask the grader about one rendered prompt (about `subject`, see chat); never raises for
    the grader's faults."""
    asked = await _ask_until_read(
        endpoint,
        prompt,
        lambda content: parse_answer(content, lenient=endpoint.lenient_answers),
        schema=GRADE_SCHEMA if endpoint.structured_output else None,
        schema_name=GRADE_SCHEMA_NAME,
        limiter=limiter,
        policy=policy,
        watch=watch,
        subject=subject,
    )
    if asked.failure is not None or asked.answer is None:
        return asked.failure or asked.spent.outcome(met=None, error="no answer")
    if watch is not None:
        watch.succeeded()
    return asked.spent.outcome(met=asked.answer.met, explanation=asked.answer.explanation, raw_output=asked.raw)


async def ask_grader_chunk(
    endpoint: CallTarget,
    prompt: str,
    n: int,
    fallback_prompt: Callable[[int], str],
    *,
    limiter: RateLimiter,
    policy: RetryPolicy = DEFAULT_RETRY,
    watch: FailureWatch | None = None,
    subject: str = "",
) -> list[GradeOutcome]:
    """Ask the grader about a chunk of `n` criteria of one response (a per-response prompt,
    grading.pipeline.response_prompt); one outcome per criterion, in order. Never raises for
    the grader's faults.

    The chunk's answer follows the per-criterion rules (the same loop): a failed call, a
    refusal, an answer cut off twice or unreadable `format_attempts` times fails every
    criterion of the chunk (missing, never "not met"). A readable answer whose entry for a
    criterion is missing, repeated or not a boolean leaves that criterion to a per-criterion
    call of its own (`fallback_prompt(index)`, index from 0), made in this same lane, so the
    run's concurrency bound holds. The chunk's tokens are shared among its criteria and its
    requests counted on the first, so the run's sums are what the provider billed."""
    asked = await _ask_until_read(
        endpoint,
        prompt,
        lambda content: read_chunk_answer(content, n),
        schema=CHUNK_SCHEMA if endpoint.structured_output else None,
        schema_name=CHUNK_SCHEMA_NAME,
        limiter=limiter,
        policy=policy,
        watch=watch,
        subject=subject,
    )
    chunk, failure, spent, raw = asked.answer, asked.failure, asked.spent, asked.raw
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
                await ask_grader(
                    endpoint, fallback_prompt(index), limiter=limiter, policy=policy, watch=watch, subject=subject
                ),
                fallback=True,
            )
            # The chunk's share of this criterion comes on top of its own call.
            outcomes.append(_plus(own, shared[index]))
        else:
            outcomes.append(replace(own, attempts=shared[index].attempts, **_usage(shared[index])))
    return outcomes


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
