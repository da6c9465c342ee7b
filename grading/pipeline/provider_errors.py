"""A provider's (or a gateway's) error reply, read and classified: what it says, and whether
asking again can help. Plain functions of plain values (no Django, no network). The run, the
provider batches and `endpoint check` all read errors here, so they always agree.

Each provider writes its errors in its own dialect, and all of them are read:

* OpenAI and Azure OpenAI: ``{"error": {"message", "type", "param", "code"}}`` (Azure adds
  ``innererror`` with its content filter's results, and says ``content_filter`` in ``code``);
* Gemini's OpenAI-compatible endpoint: a list, ``[{"error": {"code": 400, "message",
  "status": "INVALID_ARGUMENT"}}]``;
* Anthropic's: ``{"type": "error", "error": {"type", "message"}}``, the parameter at the
  head of the message ("max_tokens: 100000 > 64000, ...");
* vLLM and other FastAPI servers: pydantic's list of problems, as ``{"detail": [{"type",
  "loc", "msg"}]}`` or written as a Python list inside the message;
* Ollama: a bare string (``{"error": "model ... not found"}``) or plain text;
* OpenRouter: any of these sent with HTTP 200 (grading.pipeline.replies.ErrorReply).

The error object of the OpenAI API is ``{"error": {"message", "type", "param", "code"}}``.
Gateways pass it on in their own ways: LiteLLM, for one, sets ``code`` to the HTTP status
("400"), ``type`` to null and puts the upstream error inside ``message``, as JSON or as a
Python dict, after a prefix ("litellm.BadRequestError: OpenAIException - Error code: 400 -
{'error': {...}}"). So the fields are read from the outer object and from any error object
embedded in its message, the innermost first.

What a reply means for the call (:class:`Action`):

* ``FATAL``: no retry of any call of the run can help. A redirect (the base URL is not the
  endpoint's final address); 401, 403 and 404 (a bad key, no access, an unknown model or
  path); an exhausted quota or billing limit (``insufficient_quota`` and the like, also when
  sent as a 429); a 400 that rejects a parameter or the model.
* ``RETRY_UNCOUNTED``: a rate limit (429): wait and ask again; being told to slow down is no
  fault of the endpoint, so the failure streak does not count it.
* ``RETRY``: 408, 409, 5xx: ask again after a backoff.
* ``FAIL``: any other 4xx (a prompt too long, a content policy): this call fails, the others
  may not.
"""

from __future__ import annotations

import ast
import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

MESSAGE_CHARS = 300
# The head of a stored grade's error when the provider refuses what is graded (a content
# filter, a prompt over the context length): "Retry failed grades" leaves such grades alone,
# and the run's page names their conversations.
UNGRADABLE = "cannot be graded on this endpoint: "


class Action(enum.Enum):
    FATAL = "fatal"
    RETRY = "retry"
    RETRY_UNCOUNTED = "retry-uncounted"
    FAIL = "fail"


# Codes and types that say the account cannot pay for any call.
QUOTA_CODES = {
    "insufficient_quota",
    "billing_hard_limit_reached",
    "billing_not_active",
    "billing_limit_reached",
    "quota_exceeded",
    "access_terminated",
    "account_deactivated",
    "budget_exceeded",
    "credits_exhausted",
    "payment_required",
    "resource_exhausted_quota",
}
QUOTA_WORDS = re.compile(
    r"exceeded your current quota|check your plan and billing|billing hard limit|credit balance is too low"
    r"|insufficient (?:credits|balance|funds)|budget has been exceeded|exceeded (?:the )?budget",
    re.IGNORECASE,
)
# A 400 with one of these codes rejects the request's shape or the model itself.
FATAL_CODES = {
    "unsupported_parameter",
    "unsupported_value",
    "unknown_parameter",
    "invalid_api_key",
    "model_not_found",
    "invalid_model",
    "unsupported_model",
    "model_not_available",
    "extra_forbidden",  # pydantic (vLLM): a field the server does not take
    "deploymentnotfound",  # Azure: no such deployment
}
FATAL_WORDS = re.compile(
    r"unsupported parameter|unknown parameter|unrecognized request argument|unsupported value"
    r"|invalid model name|model[ `'\"]\S* does not exist|does not exist or you do not have access"
    r"|model not found|no such model|not a valid model|is not supported with this model"
    r"|does not support parameters|UnsupportedParamsError|unknown name \"|cannot find field"
    r"|extra inputs are not permitted|api key not valid|maximum allowed number of output tokens",
    re.IGNORECASE,
)
# Parameters of a request that are the same in every call of a run: a 400 naming one of them
# is every call's answer. (messages / input differ per call: a 400 about them is that call's.)
PER_CALL_PARAMS = {"messages", "input", "prompt"}
# Fields of our requests, as a provider may name one at the head of its message (Anthropic:
# "max_tokens: 100000 > 64000, ...").
REQUEST_FIELDS = {
    "model",
    "messages",
    "input",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "temperature",
    "top_p",
    "reasoning_effort",
    "reasoning",
    "response_format",
    "text",
    "store",
    "seed",
    "instructions",
}
_HEAD_FIELD = re.compile(r"^\s*([a-z_]+)(?:\.[\w.\[\]]+)?\s*:")
# Codes and words that say this conversation, whatever is asked about it, cannot be graded
# here: a content filter, or a prompt longer than the model's context.
CONTENT_FILTER_CODES = {"content_filter", "responsibleaipolicyviolation", "content_policy_violation"}
CONTEXT_CODES = {"context_length_exceeded", "string_above_max_length"}
CONTEXT_WORDS = re.compile(
    r"maximum context length|prompt is too long|input token count .{0,40}exceeds|context window|too many tokens",
    re.IGNORECASE,
)
_UPSTREAM_STATUS = re.compile(r"(?:error code|status(?: code)?)[:= ]+(\d{3})\b", re.IGNORECASE)


@dataclass(frozen=True)
class ProviderError:
    """The fields of an error reply, with a gateway's wrapping taken off."""

    status: int
    message: str
    type: str = ""
    code: str = ""
    param: str = ""
    location: str = ""  # a redirect's target
    filtered: bool = False  # a provider's content filter (Azure's innererror, a content_filter code)

    @property
    def kind(self) -> str:
        """What identifies this failure among others, for the failure streak: the status and
        the machine-readable fields, not the words (which may carry a request id)."""
        return f"HTTP {self.status} {self.type or '-'}/{self.code or '-'}/{self.param or '-'}"

    @property
    def quota(self) -> bool:
        return bool({self.code.lower(), self.type.lower()} & QUOTA_CODES) or bool(QUOTA_WORDS.search(self.message))

    @property
    def content_filter(self) -> bool:
        return self.filtered or self.code.lower() in CONTENT_FILTER_CODES

    @property
    def too_long(self) -> bool:
        return self.code.lower() in CONTEXT_CODES or bool(CONTEXT_WORDS.search(self.message))

    @property
    def conversation_bound(self) -> bool:
        """A failure of this conversation, not of the endpoint: no retry, no other criterion
        of it, and no later run on this endpoint can do better."""
        return self.content_filter or self.too_long

    def action(self) -> Action:
        if 300 <= self.status < 400:
            return Action.FATAL
        if self.quota or self.status in (401, 402, 403, 404):
            return Action.FATAL
        if self.status == 429:
            return Action.RETRY_UNCOUNTED
        if self.status in (408, 409) or self.status >= 500:
            return Action.RETRY
        if self.status in (400, 422) and not self.conversation_bound and self._rejects_the_request():
            return Action.FATAL
        return Action.FAIL

    def _rejects_the_request(self) -> bool:
        if {self.code.lower(), self.type.lower()} & FATAL_CODES or FATAL_WORDS.search(self.message):
            return True
        # A parameter named by the provider that every call of the run sends alike.
        return bool(self.param) and self.param.split(".")[0].split("[")[0] not in PER_CALL_PARAMS

    def describe(self, endpoint: str) -> str:
        if 300 <= self.status < 400:
            where = self.location or "another address (no Location given)"
            return (
                f"HTTP {self.status} from {endpoint}: the endpoint redirected to {where}; redirects are not "
                "followed, so set the base URL to the final address"
            )
        if self.content_filter:
            return f"HTTP {self.status} from {endpoint}: the provider's content filter refused it: {self.message}"
        return f"HTTP {self.status} from {endpoint}: {self.message}"


def _as_text(value: object) -> str:
    # A gateway that formats a missing field with str() writes "None".
    return "" if value is None or value in ("None", "null") else str(value)


# LiteLLM's tail on every error it passes on: the model group and its fallbacks.
_GATEWAY_TAIL = re.compile(r"\.? Received Model Group=.*", re.DOTALL)


def _embedded_objects(text: str) -> list[dict]:
    """Dicts written inside `text`, as JSON or as a Python literal, outermost first."""
    found = []
    position = text.find("{")
    while position != -1:
        value, end = _object_at(text, position)
        if isinstance(value, dict):
            found.append(value)
            position = text.find("{", end)
        else:
            position = text.find("{", position + 1)
    return found


def _object_at(text: str, start: int) -> tuple[object, int]:
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        pass
    # A Python dict (a gateway that formatted the upstream error with str()): find its end by
    # bracket depth, outside quotes, then read it as a literal (never evaluated as code).
    depth, quote, escaped = 0, "", False
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                try:
                    return ast.literal_eval(text[start : index + 1]), index + 1
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    return None, start + 1
    return None, start + 1


def _pydantic_fields(problem: Mapping) -> dict:
    """One of pydantic's problems ({"type", "loc", "msg"}) as error fields: a field of the
    request body is the parameter."""
    loc = problem.get("loc")
    where = [str(part) for part in loc] if isinstance(loc, list | tuple) else []
    param = where[1] if len(where) > 1 and where[0] == "body" else ""
    said = _as_text(problem.get("msg"))
    return {
        "message": f"{said} ({'.'.join(where[1:])})" if param else said,
        "code": problem.get("type"),
        "param": param,
    }


def _error_fields(body: object) -> Mapping:
    if isinstance(body, str):  # a body that is not JSON: its text is the message
        return {"message": body}
    if isinstance(body, list) and body:  # Gemini's list of errors, pydantic's list of problems
        return _error_fields(body[0])
    if isinstance(body, Mapping):
        if isinstance(body.get("detail"), list) and body["detail"]:  # FastAPI's validation error
            return _error_fields(body["detail"][0])
        if "msg" in body and "loc" in body:
            return _pydantic_fields(body)
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            if not inner.get("type") and isinstance(inner.get("status"), str):
                return {**inner, "type": inner["status"]}  # Gemini: "INVALID_ARGUMENT"
            return inner
        if isinstance(inner, str):
            return {"message": inner}
    return {}


def _filtered(body: object) -> bool:
    """Azure's content filter, as its innererror says it."""
    inner = _error_fields(body).get("innererror") if body is not None else None
    return isinstance(inner, Mapping) and (
        str(inner.get("code", "")).lower() in CONTENT_FILTER_CODES or "content_filter_result" in inner
    )


def read_error(status: int, body: object, *, text: str = "", location: str = "") -> ProviderError:
    """The error of a reply with HTTP `status`, its JSON `body` (or None) and raw `text`.

    Fields of an error embedded in the message win over the outer ones that say less (a
    gateway's null type, or its code that only repeats the status)."""
    layers = [_error_fields(body)] if body is not None else []
    message = _as_text(layers[0].get("message")) if layers else ""
    if not message:
        message = text.strip()
    depth = 0
    while message and depth < 4:
        inner = [_error_fields(found) for found in _embedded_objects(message)]
        inner = [fields for fields in inner if fields.get("message") or fields.get("code") or fields.get("type")]
        if not inner:
            break
        layers.append(inner[0])
        message = _as_text(inner[0].get("message")) or message
        depth += 1
    fields: dict[str, str] = {"type": "", "code": "", "param": ""}
    for layer in layers:  # outermost first: inner layers overwrite what they know
        for name in fields:
            value = _as_text(layer.get(name))
            if value and not (name == "code" and value.isdigit()):
                fields[name] = value
    upstream = _UPSTREAM_STATUS.search(_as_text(layers[0].get("message")) if layers else text)
    if status >= 500 and upstream and 400 <= int(upstream.group(1)) < 500:
        # A gateway that answers 500 for an upstream 4xx: the upstream status is the verdict.
        status = int(upstream.group(1))
    message = _GATEWAY_TAIL.sub("", message)
    head = _HEAD_FIELD.match(message)
    if not fields["param"] and head and head.group(1) in REQUEST_FIELDS:
        fields["param"] = head.group(1)
    return ProviderError(
        status=status,
        message=" ".join(message.split())[:MESSAGE_CHARS] or f"HTTP {status} with no message",
        type=fields["type"],
        code=fields["code"],
        param=fields["param"],
        location=location,
        filtered=_filtered(body),
    )
