"""The bodies and headers the test LLM server (tests.llm_server) sends, shaped as the OpenAI
API specification (openapi.yaml 2.3.0) and LiteLLM 1.79 have them: completions of both API
styles with refusals and cut-off answers, error bodies, a gateway's rewriting of them, and
rate-limit headers. tests/test_llm_server_replies.py checks them against the schemas of
tests/openai_schemas.py."""

from __future__ import annotations

import base64
import json
import time

REFUSAL = "I'm sorry, but I can't help with that request."
QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more information "
    "on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
)
REQUESTS_PER_MINUTE = 10_000
TOKENS_PER_MINUTE = 30_000_000
# LiteLLM's exception class for each status it passes on.
LITELLM_CLASSES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "Timeout",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


# The forms in which a gateway has been seen to repeat the key it was sent.
ECHO_FORMS = {
    "raw": lambda key: key,
    "base64": lambda key: base64.b64encode(key.encode()).decode(),
    "base64url": lambda key: base64.urlsafe_b64encode(key.encode()).decode(),
    "percent": lambda key: "".join(f"%{byte:02X}" for byte in key.encode()),
    "spaced": lambda key: " ".join(key),
    "dotted": lambda key: ".".join(key),
    "zero-width": lambda key: "\u200b".join(key),
}


def echoed(authorization: str, form: bool | str) -> str:
    """The Authorization header as a 401 repeats it: whole, or its token in the named form."""
    if form is True:
        return authorization
    scheme, _, token = authorization.partition(" ")
    return f"{scheme} {ECHO_FORMS[str(form)](token)}"


def api_error(status: int, message: str, *, param: str | None = None, code: str | None = None, kind: str = ""):
    """(status, headers, body) in the provider's error shape."""
    return (
        status,
        {},
        {"error": {"message": message, "type": kind or "invalid_request_error", "param": param, "code": code}},
    )


def quota_error() -> tuple[int, dict, dict]:
    """OpenAI's answer to a key whose quota or credit is spent: a 429, but no wait helps."""
    return api_error(429, QUOTA_MESSAGE, code="insufficient_quota", kind="insufficient_quota")


def content_filter_error() -> tuple[int, dict, dict]:
    """Azure OpenAI's answer to a prompt its content filter blocks: a 400 naming the filter,
    with the categories it found in ``innererror``."""
    return (
        400,
        {},
        {
            "error": {
                "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
                "policy. Please modify your prompt and retry.",
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
                "innererror": {
                    "code": "ResponsibleAIPolicyViolation",
                    "content_filter_result": {
                        "hate": {"filtered": False, "severity": "safe"},
                        "self_harm": {"filtered": True, "severity": "medium"},
                        "sexual": {"filtered": False, "severity": "safe"},
                        "violence": {"filtered": False, "severity": "safe"},
                    },
                },
            }
        },
    )


def litellm_error(status: int, body: dict, *, path: str, model: str) -> dict:
    """An upstream error as a LiteLLM 1.79 proxy passes it on: the status as `code`, no type
    or param, and the upstream words inside `message` (on Responses, the upstream's whole
    error JSON), behind the exception's name and before the model group."""
    upstream = body.get("error") or {}
    name = LITELLM_CLASSES.get(status, "APIError")
    words = json.dumps(body) if path.endswith("/responses") else str(upstream.get("message", ""))
    chat = not path.endswith("/responses")
    prefix = f"litellm.{name}: " + (f"{name}: " if chat and status in (404, 429, 500) else "")
    message = f"{prefix}OpenAIException - {words}. Received Model Group={model}\nAvailable Model Group Fallbacks=None"
    kind = "throttling_error" if status == 429 else None
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}


def rate_limit_headers(*, requests_left: int, tokens_left: int, reset_seconds: float) -> dict:
    """OpenAI's x-ratelimit-* headers: the limits, what is left, and when each refills."""
    reset = f"{reset_seconds:g}s"
    return {
        "x-ratelimit-limit-requests": str(REQUESTS_PER_MINUTE),
        "x-ratelimit-remaining-requests": str(max(0, requests_left)),
        "x-ratelimit-reset-requests": reset,
        "x-ratelimit-limit-tokens": str(TOKENS_PER_MINUTE),
        "x-ratelimit-remaining-tokens": str(max(0, tokens_left)),
        "x-ratelimit-reset-tokens": reset,
    }


def cut_to_limit(content: str, *, reasoning: int, limit: int | None) -> tuple[str, int, bool]:
    """(text, reasoning tokens, cut off) once the output limit is applied: reasoning tokens
    count against it first, as with OpenAI's reasoning models, then the text (4 characters a
    token)."""
    if limit is None:
        return content, reasoning, False
    if reasoning >= limit:
        return "", limit, True
    room = limit - reasoning
    if max(1, len(content) // 4) > room:
        return content[: room * 4], reasoning, True
    return content, reasoning, False


def chat_completion(model: str, *, content: str, refusal: str | None, truncated: bool, usage: dict) -> dict:
    finish = "length" if truncated else "stop"
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None if refusal is not None else content,
                    "refusal": refusal,
                    "annotations": [],
                },
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": usage,
    }


def chat_usage(prompt_tokens: int, cached: int, cache_writes: int, completion_tokens: int, reasoning: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_writes, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _text_parts(content: str) -> list[dict]:
    """The answer in two output_text parts when it is long enough, as a model's message may
    come: a reader must join them all."""
    cut = len(content) // 2 if len(content) >= 16 else len(content)
    texts = [content[:cut], content[cut:]] if cut < len(content) else [content]
    return [{"type": "output_text", "text": text, "annotations": [], "logprobs": []} for text in texts]


def responses_reply(
    body: dict,
    model: str,
    *,
    content: str,
    refusal: str | None,
    truncated: bool,
    reasoning_item: bool,
    usage: dict,
) -> dict:
    output: list[dict] = []
    if reasoning_item:
        # A reasoning model's output starts with its reasoning, before the message.
        output.append({"id": "rs_test", "type": "reasoning", "summary": [], "encrypted_content": None})
    parts = [{"type": "refusal", "refusal": refusal}] if refusal is not None else _text_parts(content)
    if parts:
        status = "incomplete" if truncated else "completed"
        output.append({"id": "msg_test", "type": "message", "status": status, "role": "assistant", "content": parts})
    return {
        "id": "resp_test",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if truncated else "completed",
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "parallel_tool_calls": True,
        "temperature": body.get("temperature"),
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": body.get("store", True),
        "text": body.get("text") or {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": {},
        "usage": usage,
    }


def responses_usage(prompt_tokens: int, cached: int, cache_writes: int, completion_tokens: int, reasoning: int) -> dict:
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_writes},
        "output_tokens": completion_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt_tokens + completion_tokens,
    }
