"""The lines of a provider batch (OpenAI's Batch API): the JSONL input file we upload, the
output and error files we download, and what each answer line means for its grade. Plain
functions of plain values (no Django, no network).

* Input: one line per distinct request, ``{"custom_id", "method": "POST", "url", "body"}``,
  the body exactly as the live call would send it. The ``custom_id`` is the request's key
  (grading.pipeline.batch_requests.request_key), which maps the line back to every item that asks
  it. Lines are cut into files of at most ``max_requests`` lines and ``max_bytes`` bytes
  (OpenAI: 50,000 and 200 MB).
* Output and error files: ``{"id", "custom_id", "response": {"status_code", "request_id",
  "body"} | null, "error": {"code", "message"} | null}``. A 200 line's body is a completion
  of the batch's endpoint, read by grading.pipeline.replies like a live reply; any other
  line is a failed request, its error read by grading.pipeline.provider_errors.
* An answer line goes through the live grader's rules (grading.pipeline.client.ask_grader):
  a refusal fails the grade quoting it; an answer cut off at the output limit is asked once
  more with twice the limit; an unreadable one is asked again, up to ``format_attempts``
  answers. A line asked again goes into the next round's batch, carrying what its earlier
  answers cost (:class:`Carry`, stored as JSON with the provider batch).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from grading.pipeline.replies import Reply

MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
REFUSAL_QUOTE_CHARS = 300


def request_line(custom_id: str, url: str, body: dict) -> bytes:
    return (json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body}) + "\n").encode()


def split_files(lines: list[bytes], *, max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> list[list[int]]:
    """The indexes of `lines` in each file, in order; a line longer than max_bytes alone is
    refused (no file could carry it)."""
    files: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index, line in enumerate(lines):
        if len(line) > max_bytes:
            raise ValueError(f"one request is {len(line):,} bytes, more than a batch file may hold ({max_bytes:,})")
        if current and (len(current) >= max_requests or size + len(line) > max_bytes):
            files.append(current)
            current, size = [], 0
        current.append(index)
        size += len(line)
    if current:
        files.append(current)
    return files


@dataclass(frozen=True)
class Line:
    """One line of an output or error file."""

    custom_id: str
    status_code: int | None  # None: the request never ran (error says why)
    body: Any = None
    error_code: str = ""
    error_message: str = ""
    malformed: str = ""  # what is wrong with the line: its item fails with that, never the task

    @property
    def answered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def read_lines(data: bytes) -> tuple[dict[str, Line], list[str]]:
    """({custom_id: line}, problems) of an output or error file. A line without a custom_id
    we can read is a problem (no item is known to be its); a line whose other fields are not
    what the Batch API sends is kept as `malformed`, which fails its item with that reason.
    Every field is checked before it is used: no line raises."""
    found: dict[str, Line] = {}
    problems: list[str] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except ValueError:
            row = None
        custom_id = row.get("custom_id") if isinstance(row, dict) else None
        if not isinstance(custom_id, str) or not custom_id:
            problems.append(f"line {number} of a result file is not a batch result")
            continue
        found[custom_id] = _line(custom_id, row)
    return found, problems


def _line(custom_id: str, row: dict) -> Line:
    response, error = row.get("response"), row.get("error")
    if response is not None and not isinstance(response, dict):
        return malformed_line(custom_id, f"its response is {_kind(response)}, not an object")
    if error is not None and not isinstance(error, dict):
        return malformed_line(custom_id, f"its error is {_kind(error)}, not an object")
    status = (response or {}).get("status_code")
    if status is not None:
        if isinstance(status, str) and status.isascii() and status.isdigit():
            status = int(status)
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            return malformed_line(custom_id, f"its status_code is {_shown(status)}, not an HTTP status")
        return Line(custom_id, status, (response or {}).get("body"))
    code, message = (error or {}).get("code"), (error or {}).get("message")
    for name, value in (("code", code), ("message", message)):
        if value is not None and not isinstance(value, str | int):
            return malformed_line(custom_id, f"its error {name} is {_kind(value)}, not text")
    return Line(custom_id, None, error_code=str(code or ""), error_message=str(message or "no answer"))


def malformed_line(custom_id: str, what: str) -> Line:
    """A line whose item fails with `what`."""
    return Line(custom_id, None, error_code="malformed_line", error_message=what, malformed=what)


def _kind(value: Any) -> str:
    return {list: "a list", str: "text", bool: "true or false", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


@dataclass(frozen=True)
class Carry:
    """What a request's answers so far cost, and what is left to try (JSON with the batch)."""

    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    limit: int = 0  # the output limit of its next request; 0: the endpoint's own (or none)
    answers: int = 0  # readable-or-not answers so far (cut-off ones do not count)
    problem: str = ""

    @classmethod
    def of(cls, data: dict | None) -> Carry:
        known = {k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def as_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v}

    def plus(self, reply: Reply) -> Carry:
        return replace(
            self,
            attempts=self.attempts + reply.attempts,
            prompt_tokens=self.prompt_tokens + reply.prompt_tokens,
            completion_tokens=self.completion_tokens + reply.completion_tokens,
            cached_tokens=self.cached_tokens + reply.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + reply.reasoning_tokens,
            cache_write_tokens=self.cache_write_tokens + reply.cache_write_tokens,
        )


@dataclass(frozen=True)
class Settled:
    """A grade's end: `verdict` is the parser's result, None when the grade failed (error)."""

    carry: Carry
    verdict: Any = None
    error: str = ""
    kind: str = ""  # what makes two failures the same (the live FailureWatch's kinds)
    raw_output: str = ""


@dataclass(frozen=True)
class AskAgain:
    carry: Carry = field(default_factory=Carry)


def quote(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > REFUSAL_QUOTE_CHARS:
        text = text[: REFUSAL_QUOTE_CHARS - 1] + "…"
    return f"“{text}”" if text else "(no words given)"


def judge(
    carry: Carry,
    reply: Reply,
    *,
    base_limit: int | None,
    format_attempts: int,
    parse: Callable[[str], Any],
    malformed: type[Exception],
) -> Settled | AskAgain:
    """The next step after one answer, by the live grader's rules: `parse` reads the verdict
    and raises `malformed` for an unreadable answer."""
    carry = carry.plus(reply)
    limit = carry.limit or base_limit
    if reply.refused:
        return Settled(
            carry, error=f"the grader refused: {quote(reply.content)}", kind="grader refused", raw_output=reply.content
        )
    if reply.truncated:
        if base_limit is not None and limit == base_limit:
            return AskAgain(replace(carry, limit=base_limit * 2))  # once, with room to finish
        at = f"{limit} output tokens" if limit is not None else "the model's own output limit"
        return Settled(
            carry, error=f"the grader's answer was cut off at {at}", kind="cut off", raw_output=reply.content
        )
    carry = replace(carry, answers=carry.answers + 1)
    try:
        verdict = parse(reply.content)
    except malformed as exc:
        carry = replace(carry, problem=str(exc))
        if carry.answers < format_attempts:
            return AskAgain(carry)
        return Settled(
            carry,
            error=f"unreadable answer {format_attempts} times: {exc}",
            kind="unreadable",
            raw_output=reply.content,
        )
    return Settled(carry, verdict=verdict, raw_output=reply.content)
