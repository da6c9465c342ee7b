"""The OpenAPI schema's refusals: drf-spectacular documents the answers each view declares, and
this hook adds the ones every API view can give, so that the schema lists every status code a
client will meet (tests/test_api_fuzz.py checks each answer against it):

* 401 without a valid token, 403 when the account's role may not do this;
* 404 for an unknown name in the path, and for a page past the end (or `?page=0`);
* 400 for a filter value that means nothing, or a request body that is not valid;
* 429 past a rate limit, for the operations that have one (launching a run, asking for a token);
* 503 with Retry-After while the database cannot be reached (any operation,
  healthbench_web.errors), and while the task queue or a limit's counts cannot be reached (the
  operations that queue work: a launch, a retry, a resume).
"""

from typing import Any

ERROR = {
    "type": "object",
    "description": "A refusal: `detail` says why, and what to do.",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
INVALID = {
    "type": "object",
    "description": "What was wrong with the request: per parameter or field (`non_field_errors` "
    "for the request as a whole), a list of messages.",
    "additionalProperties": {
        "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}, {"type": "object"}]
    },
}
OPEN = {"/api/token/", "/api/schema/"}  # no token needed, nothing to refuse by role
LIMITED = {("/api/runs/", "post"), ("/api/token/", "post")}  # path, method: may answer 429
# path, method: queue work, so may answer 503 while the task queue is down
QUEUEING = {("/api/runs/", "post"), ("/api/runs/{name}/retry/", "post"), ("/api/runs/{name}/resume/", "post")}


def _response(description: str, schema: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }


def document_refusals(result: dict, generator, request, public) -> dict:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR
    schemas["ValidationErrors"] = INVALID
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            parameters = operation.get("parameters", [])
            query = {p["name"] for p in parameters if p.get("in") == "query"}
            refusals: dict[str, tuple[str, str]] = {}
            if query - {"page", "format"} or "requestBody" in operation:
                refusals["400"] = (
                    "The request is not valid: see the messages per parameter or field.",
                    "ValidationErrors",
                )
            if path not in OPEN:
                refusals["401"] = ("No token, or a token that is not valid.", "Error")
                refusals["403"] = ("This account's role may not do this.", "Error")
            if any(p.get("in") == "path" for p in parameters) or "page" in query:
                refusals["404"] = ("No such object, or a page past the end of the list.", "Error")
            if (path, method) in LIMITED:
                refusals["429"] = ("Past the rate limit: `detail` names it and when to try again.", "Error")
            if (path, method) in QUEUEING:
                refusals["503"] = (
                    "The database, the task queue or the limit's counts cannot be reached: nothing was "
                    "changed; try again later (Retry-After, when given, says when).",
                    "Error",
                )
            else:
                refusals["503"] = (
                    "The database cannot be reached: try again after Retry-After seconds.",
                    "Error",
                )
            for code, (description, schema) in refusals.items():
                if code not in responses or "content" not in responses[code]:
                    responses[code] = _response(responses.get(code, {}).get("description") or description, schema)
    return result
