"""What a failed call means, read from the openai package's exception: the words a grade or
the run will say (without the endpoint's key), the kind that makes two failures the same for
the streak, whether to retry (grading.pipeline.provider_errors' ``Action``), how long the
provider asked us to wait and the limits it stated. grading.pipeline.client acts on it, and
grading.pipeline.provider_batches reads a Batch API call's failure by the same rules.
"""

from __future__ import annotations

import email.utils
import re
import socket
import time
from dataclasses import dataclass
from typing import TypeVar

import httpx2
import openai

from grading.pipeline.bounded_transport import ReplyTooLarge
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.provider_errors import Action, read_error
from grading.pipeline.replies import ErrorReply
from healthbench_web.redact import redact

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


_E = TypeVar("_E", bound=BaseException)


def _in_chain(exc: BaseException, kind: type[_E]) -> _E | None:
    """The first exception of `kind` in `exc`'s chain of causes, or None."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, kind):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def endpoint_keys(endpoint: CallTarget) -> list[str]:
    try:
        return [endpoint.api_key()] if endpoint.api_key_env else []
    except Exception:  # no key, nothing to remove
        return []


@dataclass(frozen=True)
class Failure:
    error: str  # what the grade or the run will say
    kind: str  # what makes two failures the same, for the streak
    action: Action
    retry_after: float | None = None
    conversation_bound: bool = False  # no call about this conversation can succeed here
    stated: tuple[int, int] = (0, 0)  # the provider's requests and tokens per minute, when it said


def status_failure(exc: openai.APIStatusError, endpoint: CallTarget) -> Failure:
    headers = exc.response.headers
    problem = read_error(
        exc.status_code, exc.body, text=_body_text(exc.response), location=headers.get("location") or ""
    )
    return Failure(
        error=redact(problem.describe(endpoint.name or endpoint.model), endpoint_keys(endpoint)),
        kind=problem.kind,
        action=problem.action(),
        retry_after=_retry_after(headers),
        conversation_bound=problem.conversation_bound,
        stated=(_stated(headers, "requests"), _stated(headers, "tokens")),
    )


def _stated(headers: httpx2.Headers, what: str) -> int:
    """A limit in OpenAI's x-ratelimit-limit-* headers; 0 when absent or not a positive count
    (Azure sends -1 where it has none)."""
    value = (headers.get(f"x-ratelimit-limit-{what}") or "").strip()
    return int(value) if value.isdigit() else 0


def error_reply_failure(exc: ErrorReply, endpoint: CallTarget) -> Failure:
    """An error sent with HTTP 200, classified as the status it names."""
    problem = read_error(exc.status, exc.body)
    said = problem.describe(endpoint.name or endpoint.model).replace(
        f"HTTP {exc.status} from", f"HTTP 200 carrying a {exc.status} error from", 1
    )
    return Failure(
        error=redact(said, endpoint_keys(endpoint)),
        kind=problem.kind,
        action=problem.action(),
        conversation_bound=problem.conversation_bound,
    )


def _body_text(response: httpx2.Response) -> str:
    try:
        return response.text[:2000]
    except Exception:  # a body that cannot be read says nothing
        return ""


def transport_failure(exc: openai.APIConnectionError, endpoint: CallTarget) -> Failure:
    too_large = _in_chain(exc, ReplyTooLarge)
    if too_large is not None:
        # Not retried: the same question would get the same swollen answer.
        return Failure(str(too_large), "reply too large", Action.FAIL)
    fault = _transport_fault(exc, endpoint)
    if fault is not None:
        error, fatal = fault
        return Failure(error, "refused or unresolved", Action.FATAL if fatal else Action.RETRY)
    if isinstance(exc, openai.APITimeoutError):
        return Failure(f"no answer within {endpoint.timeout:g} s", "timeout", Action.RETRY)
    words = redact(f"connection failed: {exc.__cause__ or exc}", endpoint_keys(endpoint))
    return Failure(words, "connection failed", Action.RETRY)
