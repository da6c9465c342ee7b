"""What the test server reads from a request as the providers do: which models reason (and
refuse the parameters reasoning models refuse), the Responses API's fields and messages, and
whether structured output is asked."""

from __future__ import annotations

import re

from tests.llm_shapes import api_error

REASONING_MODEL = re.compile(r"reasoning|^(o1|o3|o4|gpt-5)")
REASONING_TOKENS = {"none": 0, "minimal": 0, "low": 64, "medium": 192, "high": 512, "xhigh": 1024, "max": 2048, "": 128}
RESPONSES_FIELDS = {
    "model",
    "input",
    "instructions",
    "max_output_tokens",
    "temperature",
    "top_p",
    "reasoning",
    "text",
    "store",
    "metadata",
    "user",
    "truncation",
    "parallel_tool_calls",
    "tools",
    "tool_choice",
    "previous_response_id",
    "include",
    "stream",
    "service_tier",
    "background",
}


def is_reasoning(model: str) -> bool:
    return bool(REASONING_MODEL.search(model))


def unsupported(param: str, instead: str = "") -> tuple[int, dict, dict]:
    tail = f" Use '{instead}' instead." if instead else ""
    return api_error(
        400,
        f"Unsupported parameter: '{param}' is not supported with this model.{tail}",
        param=param,
        code="unsupported_parameter",
    )


def wants_schema(body: dict) -> bool:
    """Structured output asked: response_format (chat) or text.format (Responses) json_schema."""
    chat = (body.get("response_format") or {}).get("type") == "json_schema"
    responses = ((body.get("text") or {}).get("format") or {}).get("type") == "json_schema"
    return chat or responses


def responses_messages(body: dict) -> list[dict]:
    """The Responses API's instructions and input as chat-like messages."""
    messages = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    given = body.get("input") or ""
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    for item in given:
        content = item.get("content", "")
        if isinstance(content, list):
            content = "".join(str(part.get("text", "")) for part in content)
        messages.append({"role": item.get("role", "user"), "content": content})
    return messages
