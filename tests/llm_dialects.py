"""Provider error dialects for the test server (tests/llm_server.py, ``dialect=``): an error
the server would send in OpenAI's shape, rewritten as each provider documents its own, so that
a run against the test server meets what it would meet against that provider. Each returns
(status, payload): a dict or list is sent as JSON, a str as plain text.

* ``azure``: OpenAI's shape; a missing model is a missing deployment (``DeploymentNotFound``).
* ``gemini``: Gemini's OpenAI-compatible endpoint: a list holding ``{"error": {"code",
  "message", "status"}}``; an unknown or unsupported field is 'Unknown name "x": Cannot find
  field.'
* ``anthropic``: ``{"type": "error", "error": {"type", "message"}}``, the field at the head of
  the message ("temperature: Extra inputs are not permitted").
* ``vllm``: ``{"error": {"message", "type": "BadRequestError", "param": null, "code": 400}}``
  with pydantic's problem list written inside the message for an unknown field.
* ``ollama``: ``{"error": {"message", "type": "api_error", "param": null, "code": null}}``.
* ``openrouter``: OpenRouter's ``{"error": {"code": STATUS, "message", "metadata"}}``, sent
  with HTTP 200 (as it does for an upstream's failure).
* ``litellm``: a LiteLLM 1.79 proxy's wrapping (tests.llm_shapes.litellm_error).
"""

from __future__ import annotations

from tests.llm_shapes import litellm_error

DIALECTS = ("openai", "azure", "gemini", "anthropic", "vllm", "ollama", "openrouter", "litellm")
GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _field_refused(error: dict) -> str:
    """The field an OpenAI 400 names as unsupported or unknown, else ''."""
    if error.get("code") in ("unsupported_parameter", "unknown_parameter") and error.get("param"):
        return str(error["param"]).split(".")[0]
    return ""


def rewrite(dialect: str, status: int, body: dict, *, path: str, model: str) -> tuple[int, object]:
    error = body.get("error") or {}
    message = str(error.get("message", ""))
    field = _field_refused(error)
    if dialect == "azure":
        if error.get("code") == "model_not_found":
            return 404, {"error": {"code": "DeploymentNotFound", "message": "The API deployment for this resource "
                                   "does not exist. If you created the deployment within the last 5 minutes, "
                                   "please wait a moment and try again."}}  # fmt: skip
        return status, body
    if dialect == "gemini":
        if field:
            message = f'Invalid JSON payload received. Unknown name "{field}": Cannot find field.'
        elif error.get("code") == "model_not_found":
            message = f"models/{model} is not found for API version v1beta, or is not supported for generateContent."
        return status, [{"error": {"code": status, "message": message, "status": GEMINI_STATUS.get(status, "UNKNOWN")}}]
    if dialect == "anthropic":
        if field:
            message = f"{field}: Extra inputs are not permitted"
        elif error.get("code") == "model_not_found":
            message = f"model: {model}"
        return status, {
            "type": "error",
            "error": {"type": ANTHROPIC_TYPES.get(status, "api_error"), "message": message},
        }
    if dialect == "vllm":
        if field:
            problem = {"type": "extra_forbidden", "loc": ("body", field), "msg": "Extra inputs are not permitted"}
            message = repr([problem])  # vLLM writes pydantic's list with str()
        kind = {404: "NotFoundError", 429: "RateLimitError"}.get(
            status, "BadRequestError" if status < 500 else "InternalServerError"
        )
        return status, {"error": {"message": message, "type": kind, "param": None, "code": status}}
    if dialect == "ollama":
        return status, {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
    if dialect == "openrouter":
        return 200, {"error": {"code": status, "message": message, "metadata": {"provider_name": "Test"}}}
    if dialect == "litellm":
        return status, litellm_error(status, body, path=path, model=model)
    return status, body
