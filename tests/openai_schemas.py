"""JSON Schemas of the reply objects we read, written from the OpenAI API specification
(openai/openai-openapi, openapi.yaml, info.version 2.3.0): CreateChatCompletionResponse with
ChatCompletionResponseMessage and CompletionUsage; the Responses API's Response with
OutputMessage (OutputTextContent, RefusalContent), ReasoningItem and ResponseUsage; and
ErrorResponse. Each keeps the specification's required fields, types and enums for the parts
we read, and leaves out the rest (tools, audio, annotations' inner shape), which the
specification allows to be present.

tests/test_llm_server_replies.py validates the test server's replies against them, so that
a test that passes against that server passes against what a provider may really send.
"""

SPEC_VERSION = "2.3.0"

_INT = {"type": "integer"}
_STR = {"type": "string"}
_NULLABLE_STR = {"anyOf": [_STR, {"type": "null"}]}

COMPLETION_USAGE = {
    "type": "object",
    "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
    "properties": {
        "prompt_tokens": _INT,
        "completion_tokens": _INT,
        "total_tokens": _INT,
        "prompt_tokens_details": {
            "type": "object",
            "properties": {"cached_tokens": _INT, "cache_write_tokens": _INT, "audio_tokens": _INT},
        },
        "completion_tokens_details": {
            "type": "object",
            "properties": {
                "reasoning_tokens": _INT,
                "audio_tokens": _INT,
                "accepted_prediction_tokens": _INT,
                "rejected_prediction_tokens": _INT,
            },
        },
    },
}

CHAT_COMPLETION = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "CreateChatCompletionResponse",
    "type": "object",
    "required": ["choices", "created", "id", "model", "object"],
    "properties": {
        "id": _STR,
        "object": {"enum": ["chat.completion"]},
        "created": _INT,
        "model": _STR,
        "choices": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["finish_reason", "index", "message", "logprobs"],
                "properties": {
                    "finish_reason": {"enum": ["stop", "length", "tool_calls", "content_filter", "function_call"]},
                    "index": _INT,
                    "logprobs": {"anyOf": [{"type": "object"}, {"type": "null"}]},
                    "message": {
                        "title": "ChatCompletionResponseMessage",
                        "type": "object",
                        "required": ["role", "content", "refusal"],
                        "properties": {
                            "role": {"enum": ["assistant"]},
                            "content": _NULLABLE_STR,
                            "refusal": _NULLABLE_STR,
                            "annotations": {"type": "array"},
                        },
                    },
                },
            },
        },
        "usage": COMPLETION_USAGE,
    },
}

_OUTPUT_TEXT = {
    "title": "OutputTextContent",
    "type": "object",
    "required": ["type", "text", "annotations", "logprobs"],
    "properties": {
        "type": {"const": "output_text"},
        "text": _STR,
        "annotations": {"type": "array"},
        "logprobs": {"type": "array"},
    },
}
_REFUSAL = {
    "title": "RefusalContent",
    "type": "object",
    "required": ["type", "refusal"],
    "properties": {"type": {"const": "refusal"}, "refusal": _STR},
}
_OUTPUT_MESSAGE = {
    "title": "OutputMessage",
    "type": "object",
    "required": ["id", "type", "role", "content", "status"],
    "properties": {
        "id": _STR,
        "type": {"const": "message"},
        "role": {"const": "assistant"},
        "status": {"enum": ["in_progress", "completed", "incomplete"]},
        "content": {"type": "array", "items": {"oneOf": [_OUTPUT_TEXT, _REFUSAL]}},
    },
}
_REASONING_ITEM = {
    "title": "ReasoningItem",
    "type": "object",
    "required": ["id", "summary", "type"],
    "properties": {
        "id": _STR,
        "type": {"const": "reasoning"},
        "summary": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "text"],
                "properties": {"type": {"const": "summary_text"}},
            },
        },
        "encrypted_content": _NULLABLE_STR,
    },
}
RESPONSE_USAGE = {
    "title": "ResponseUsage",
    "type": "object",
    "required": ["input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens"],
    "properties": {
        "input_tokens": _INT,
        "input_tokens_details": {
            "type": "object",
            "required": ["cached_tokens", "cache_write_tokens"],
            "properties": {"cached_tokens": _INT, "cache_write_tokens": _INT},
        },
        "output_tokens": _INT,
        "output_tokens_details": {
            "type": "object",
            "required": ["reasoning_tokens"],
            "properties": {"reasoning_tokens": _INT},
        },
        "total_tokens": _INT,
    },
}
RESPONSE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Response",
    "type": "object",
    "required": [
        "id",
        "object",
        "created_at",
        "error",
        "incomplete_details",
        "instructions",
        "model",
        "tools",
        "output",
        "parallel_tool_calls",
        "metadata",
        "tool_choice",
        "temperature",
        "top_p",
    ],
    "properties": {
        "id": _STR,
        "object": {"const": "response"},
        "created_at": {"type": "number"},
        "status": {"enum": ["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"]},
        "model": _STR,
        "error": {"anyOf": [{"type": "object", "required": ["code", "message"]}, {"type": "null"}]},
        "incomplete_details": {
            "anyOf": [
                {"type": "object", "properties": {"reason": {"enum": ["max_output_tokens", "content_filter"]}}},
                {"type": "null"},
            ]
        },
        "output": {"type": "array", "items": {"oneOf": [_OUTPUT_MESSAGE, _REASONING_ITEM]}},
        "usage": RESPONSE_USAGE,
        "temperature": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "top_p": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "tools": {"type": "array"},
        "parallel_tool_calls": {"type": "boolean"},
        "metadata": {"anyOf": [{"type": "object"}, {"type": "null"}]},
    },
}

ERROR_RESPONSE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ErrorResponse",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "title": "Error",
            "type": "object",
            "required": ["type", "message", "param", "code"],
            "properties": {"code": _NULLABLE_STR, "message": _STR, "param": _NULLABLE_STR, "type": _STR},
        }
    },
}
