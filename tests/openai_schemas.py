"""JSON Schemas of the reply objects we read, written from the OpenAI API specification
(openai/openai-openapi, openapi.yaml, info.version 2.3.0): CreateChatCompletionResponse with
ChatCompletionResponseMessage and CompletionUsage; the Responses API's Response with
OutputMessage (OutputTextContent, RefusalContent), ReasoningItem and ResponseUsage;
ErrorResponse; and the Files and Batch API's objects (below). Each keeps the specification's
required fields, types and enums for the parts we read, and leaves out the rest (tools,
audio, annotations' inner shape), which the specification allows to be present.

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

# --- the Files and Batch API ---------------------------------------------------------------
# Batch, BatchError, BatchRequestCounts, OpenAIFile, CreateBatchRequest and ListBatchesResponse
# as the specification has them. Fields it does not require may be null: its own examples of
# the batch object show them so (output_file_id, in_progress_at, ... before they are known).
# The lines of the input, output and error files are not in openapi.yaml; they follow the API
# reference's "The request input object" and "The request output object".


def _maybe(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


_STAMP = _maybe(_INT)
_STAMPS = (
    "in_progress_at",
    "expires_at",
    "finalizing_at",
    "completed_at",
    "failed_at",
    "expired_at",
    "cancelling_at",
    "cancelled_at",
)

BATCH = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Batch",
    "type": "object",
    "required": ["id", "object", "endpoint", "input_file_id", "completion_window", "status", "created_at"],
    "properties": {
        "id": _STR,
        "object": {"enum": ["batch"]},
        "endpoint": _STR,
        "model": _maybe(_STR),
        "errors": _maybe(
            {
                "type": "object",
                "properties": {
                    "object": _STR,
                    "data": {
                        "type": "array",
                        "items": {
                            "title": "BatchError",
                            "type": "object",
                            "properties": {
                                "code": _STR,
                                "message": _STR,
                                "param": _NULLABLE_STR,
                                "line": _maybe(_INT),
                            },
                        },
                    },
                },
            }
        ),
        "input_file_id": _STR,
        "completion_window": _STR,
        "status": {
            "enum": [
                "validating",
                "failed",
                "in_progress",
                "finalizing",
                "completed",
                "expired",
                "cancelling",
                "cancelled",
            ]
        },
        "output_file_id": _maybe(_STR),
        "error_file_id": _maybe(_STR),
        **dict.fromkeys(
            (
                "in_progress_at",
                "expires_at",
                "finalizing_at",
                "completed_at",
                "failed_at",
                "expired_at",
                "cancelling_at",
                "cancelled_at",
            ),
            _STAMP,
        ),
        "created_at": _INT,
        "request_counts": {
            "title": "BatchRequestCounts",
            "type": "object",
            "required": ["total", "completed", "failed"],
            "properties": {"total": _INT, "completed": _INT, "failed": _INT},
        },
        "metadata": _maybe({"type": "object", "additionalProperties": _STR, "maxProperties": 16}),
    },
}

BATCH_LIST = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ListBatchesResponse",
    "type": "object",
    "required": ["object", "data", "has_more"],
    "properties": {
        "object": {"enum": ["list"]},
        "data": {"type": "array", "items": BATCH},
        "first_id": _NULLABLE_STR,
        "last_id": _NULLABLE_STR,
        "has_more": {"type": "boolean"},
    },
}

CREATE_BATCH_REQUEST = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "CreateBatchRequest",
    "type": "object",
    "required": ["input_file_id", "endpoint", "completion_window"],
    "properties": {
        "input_file_id": _STR,
        "endpoint": {
            "enum": [
                "/v1/responses",
                "/v1/chat/completions",
                "/v1/embeddings",
                "/v1/completions",
                "/v1/moderations",
                "/v1/images/generations",
                "/v1/images/edits",
                "/v1/videos",
            ]
        },
        "completion_window": {"enum": ["24h"]},
        "metadata": _maybe(
            {"type": "object", "additionalProperties": {"type": "string", "maxLength": 512}, "maxProperties": 16}
        ),
    },
}

OPENAI_FILE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "OpenAIFile",
    "type": "object",
    "required": ["id", "object", "bytes", "created_at", "filename", "purpose", "status"],
    "properties": {
        "id": _STR,
        "bytes": _INT,
        "created_at": _INT,
        "expires_at": _STAMP,
        "filename": _STR,
        "object": {"enum": ["file"]},
        "purpose": {
            "enum": [
                "assistants",
                "assistants_output",
                "batch",
                "batch_output",
                "fine-tune",
                "fine-tune-results",
                "vision",
                "user_data",
            ]
        },
        "status": {"enum": ["uploaded", "processed", "error"]},
        "status_details": _NULLABLE_STR,
    },
}

BATCH_REQUEST_INPUT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "BatchRequestInput",
    "type": "object",
    "required": ["custom_id", "method", "url", "body"],
    "properties": {
        "custom_id": _STR,
        "method": {"enum": ["POST"]},
        "url": _STR,
        "body": {"type": "object"},
    },
}

BATCH_REQUEST_OUTPUT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "BatchRequestOutput",
    "type": "object",
    "required": ["id", "custom_id", "response", "error"],
    "properties": {
        "id": _STR,
        "custom_id": _STR,
        "response": _maybe(
            {
                "type": "object",
                "required": ["status_code", "request_id", "body"],
                "properties": {"status_code": _INT, "request_id": _STR, "body": {"type": "object"}},
            }
        ),
        "error": _maybe(
            {"type": "object", "required": ["code", "message"], "properties": {"code": _STR, "message": _STR}}
        ),
    },
}
