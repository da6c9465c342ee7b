"""The request each kind of endpoint accepts, and its reply read back: plain functions of
plain values (no Django, no network).

* Chat Completions, ordinary model: ``temperature`` (when set) and ``max_tokens``.
* Chat Completions, reasoning model (o-series, GPT-5): ``max_completion_tokens`` and
  ``reasoning_effort``; never ``temperature`` or ``max_tokens``, which they reject with a 400.
* Responses API: ``input`` and ``max_output_tokens``; ``reasoning: {effort}`` for reasoning
  models, ``temperature`` for the others; ``store: false`` so that the provider keeps no
  copy of health conversations.
* Structured output: the grader's answer as a strict JSON schema, ``response_format`` on
  Chat Completions and ``text.format`` on Responses.
* No output limit (``max_tokens`` None): none of the limit fields is sent, and the model's
  own limit applies (the reference sends none to a reasoning grader on Responses).
* A system message goes first: ``role: system`` on Chat Completions, ``role: developer`` on
  Responses, as the reference's samplers send it.

The reply is read by grading.pipeline.replies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grading.pipeline.response_prompt import CHUNK_SCHEMA, CHUNK_SCHEMA_NAME, chunk_messages

if TYPE_CHECKING:
    from grading.pipeline.endpoint import CallTarget

CHARS_PER_TOKEN = 4  # for estimates and the token bucket, before the endpoint counts them
CHAT = "chat"
RESPONSES = "responses"

# The grader's answer, {"explanation": str, "criteria_met": bool}, as a strict schema.
GRADE_SCHEMA_NAME = "rubric_grade"
GRADE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"explanation": {"type": "string"}, "criteria_met": {"type": "boolean"}},
    "required": ["explanation", "criteria_met"],
    "additionalProperties": False,
}


def request_body(
    *,
    api_style: str,
    model: str,
    messages: list[dict],
    max_tokens: int | None,
    temperature: float | None,
    reasoning: bool,
    reasoning_effort: str,
    schema: dict | None = None,
    schema_name: str = GRADE_SCHEMA_NAME,
    system_message: str = "",
) -> tuple[str, dict]:
    """(path under the base URL, JSON body) for one call."""
    if api_style == RESPONSES:
        if system_message:
            messages = [{"role": "developer", "content": system_message}, *messages]
        body: dict[str, Any] = {"model": model, "input": messages, "store": False}
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
        if reasoning:
            if reasoning_effort:
                body["reasoning"] = {"effort": reasoning_effort}
        elif temperature is not None:
            body["temperature"] = temperature
        if schema is not None:
            body["text"] = {"format": {"type": "json_schema", "name": schema_name, "schema": schema, "strict": True}}
        return "/responses", body
    if system_message:
        messages = [{"role": "system", "content": system_message}, *messages]
    body = {"model": model, "messages": messages}
    if reasoning:
        if max_tokens is not None:
            body["max_completion_tokens"] = max_tokens
        if reasoning_effort:
            body["reasoning_effort"] = reasoning_effort
    else:
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if temperature is not None:
            body["temperature"] = temperature
    if schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": True},
        }
    return "/chat/completions", body


def call_request(
    target: CallTarget,
    messages: list[dict],
    *,
    schema: dict | None = None,
    schema_name: str = GRADE_SCHEMA_NAME,
    max_tokens: int | None = None,
) -> tuple[str, dict]:
    """(path, body) of one call to a run's endpoint; `max_tokens` overrides its output limit
    (a cut-off answer is asked again with more room)."""
    return request_body(
        api_style=target.api_style,
        model=target.model,
        messages=messages,
        max_tokens=max_tokens or target.max_tokens,
        temperature=target.temperature,
        reasoning=target.reasoning,
        reasoning_effort=target.reasoning_effort,
        schema=schema,
        schema_name=schema_name,
        system_message=target.system_message,
    )


def criterion_request(target: CallTarget, prompt: str, *, max_tokens: int | None = None) -> tuple[str, dict]:
    """A per-criterion grader call: the rendered prompt, and the verdict's schema where the
    endpoint honours one."""
    schema = GRADE_SCHEMA if target.structured_output else None
    return call_request(target, [{"role": "user", "content": prompt}], schema=schema, max_tokens=max_tokens)


def chunk_request(target: CallTarget, prompt: str, *, max_tokens: int | None = None) -> tuple[str, dict]:
    """A per-response grader call about one chunk of a response's criteria
    (grading.pipeline.response_prompt.render_chunk; read the answer with read_chunk_answer)."""
    schema = CHUNK_SCHEMA if target.structured_output else None
    return call_request(
        target, chunk_messages(prompt), schema=schema, schema_name=CHUNK_SCHEMA_NAME, max_tokens=max_tokens
    )
