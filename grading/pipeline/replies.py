"""A provider's 200 reply, read: its text, whether the model refused or was cut off, and its
usage. Plain functions of plain values (no Django, no network).

What the OpenAI API specification (openapi.yaml 2.3.0) says a reply can be, and what we make
of it:

* Chat Completions: ``choices[0].message`` holds ``content`` and ``refusal`` (one of them is
  null); ``finish_reason`` is ``stop``, ``length`` (the output limit was reached),
  ``content_filter`` (the provider withheld the text), ``tool_calls`` or ``function_call``.
* Responses: ``output`` is a list of items, reasoning items among them (often first); each
  ``message`` item holds ``output_text`` and ``refusal`` parts, several of them at times.
  ``status`` is ``completed`` or ``incomplete`` (then ``incomplete_details.reason`` is
  ``max_output_tokens`` or ``content_filter``); ``failed``, ``in_progress``, ``queued`` and
  ``cancelled`` are no answer.

A refusal's words are the reply's text (what a user would read), marked ``refused``. A reply
cut off at its output limit keeps the text it has, marked ``truncated``. A reply with no
text at all, and neither mark, is a failed call (:class:`EmptyAnswer`), never graded as an
empty answer; a body that is no completion at all (:class:`NotACompletion`) is asked again,
and one that is an error object (:class:`ErrorReply`, an error sent with HTTP 200) is read as
the error it names.

Usage comes back under each API's own names, with the tokens the prompt cache served
(``cached_tokens``), the tokens written to it where the provider reports them
(``cache_write_tokens``; Anthropic through a gateway says ``cache_creation_input_tokens``)
and the tokens spent reasoning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

CHAT = "chat"
RESPONSES = "responses"


@dataclass(frozen=True)
class Reply:
    content: str
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    refused: bool = False  # the model (or the provider's filter) declined; content is its words
    truncated: bool = False  # cut off at the output limit; content is what came before
    filtered: bool = False  # the provider's content filter withheld the answer (refused too)


class NotACompletion(ValueError):
    """A 200 whose body is not a completion of the API asked, or holds no answer at all."""


class ErrorReply(NotACompletion):
    """A 200 whose body is an error object (OpenRouter sends an upstream failure so):
    read as the error it is, with the status it names (grading.pipeline.provider_errors)."""

    def __init__(self, body: dict):
        error = body.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        self.body = body
        self.status = int(code) if isinstance(code, int) and 400 <= code < 600 else 502
        super().__init__(f"an error sent with HTTP 200 (status {self.status})")


class EmptyAnswer(NotACompletion):
    """A completion with no text, no refusal and no sign of a cut-off. Asking again rarely
    helps (a gateway that drops refusals, as LiteLLM 1.79 does with Chat Completions' refusal
    field, sends this for every refusal), so the call fails with this reason."""


def _int(value: Any) -> int:
    return int(value or 0)


def _details(usage: dict, name: str) -> dict:
    details = usage.get(name)
    return details if isinstance(details, dict) else {}


def _cache_writes(usage: dict, details: dict) -> int:
    return _int(details.get("cache_write_tokens") or usage.get("cache_creation_input_tokens"))


def parse_reply(raw: bytes, *, api_style: str, attempts: int) -> Reply:
    """The text, marks and usage of a reply; raises NotACompletion for anything else."""
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise NotACompletion("the answer is not a JSON object")
        if data.get("error") and not data.get("choices") and not data.get("output"):
            raise ErrorReply(data)
        return _responses(data, attempts) if api_style == RESPONSES else _chat(data, attempts)
    except NotACompletion:
        raise
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise NotACompletion(f"the answer is not a completion ({type(exc).__name__}: {exc})") from None


def _chat(data: dict, attempts: int) -> Reply:
    choice = data["choices"][0]
    message = choice["message"]
    content = message.get("content") or ""
    refusal = message.get("refusal") or ""
    finish = choice.get("finish_reason") or ""
    filtered = finish == "content_filter"
    refused = bool(refusal) or filtered
    truncated = finish == "length"
    if not isinstance(content, str) or not isinstance(refusal, str):
        raise NotACompletion("the message's content is not text")
    if not (content or refusal or refused or truncated):
        raise EmptyAnswer(
            f"the answer holds no text (finish_reason {finish or 'missing'}); a gateway in between may have "
            "dropped a refusal"
        )
    usage = data.get("usage") or {}
    prompt_details = _details(usage, "prompt_tokens_details")
    return Reply(
        content=content or refusal,
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=_int(prompt_details.get("cached_tokens")),
        cache_write_tokens=_cache_writes(usage, prompt_details),
        reasoning_tokens=_int(_details(usage, "completion_tokens_details").get("reasoning_tokens")),
        attempts=attempts,
        refused=refused,
        truncated=truncated,
        filtered=filtered,
    )


def _responses(data: dict, attempts: int) -> Reply:
    status = data.get("status")
    if status not in ("completed", "incomplete", None):
        error = data.get("error") or {}
        words = f": {error.get('message')}" if isinstance(error, dict) and error.get("message") else ""
        raise NotACompletion(f"the response's status is {status}{words}")
    texts: list[str] = []
    refusals: list[str] = []
    for item in data["output"]:
        if item.get("type") != "message":
            continue  # reasoning, tool calls: not the answer
        for part in item.get("content") or []:
            if part.get("type") == "output_text":
                texts.append(part["text"])
            elif part.get("type") == "refusal":
                refusals.append(part["refusal"])
    reason = (data.get("incomplete_details") or {}).get("reason") if status == "incomplete" else None
    filtered = reason == "content_filter"
    refused = bool(refusals) or filtered
    truncated = reason == "max_output_tokens"
    content = "".join(texts) or "".join(refusals)
    if not (content or refused or truncated):
        raise EmptyAnswer("the answer holds no output text")
    usage = data.get("usage") or {}
    input_details = _details(usage, "input_tokens_details")
    return Reply(
        content=content,
        prompt_tokens=_int(usage.get("input_tokens")),
        completion_tokens=_int(usage.get("output_tokens")),
        cached_tokens=_int(input_details.get("cached_tokens")),
        cache_write_tokens=_cache_writes(usage, input_details),
        reasoning_tokens=_int(_details(usage, "output_tokens_details").get("reasoning_tokens")),
        attempts=attempts,
        refused=refused,
        truncated=truncated,
        filtered=filtered,
    )
