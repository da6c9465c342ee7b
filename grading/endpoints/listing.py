"""Endpoints as lines of text, for `endpoint list` and `grade --list-endpoints`."""

from __future__ import annotations

from grading.models import Endpoint
from grading.reports.grader_marks import endpoint_verdict

NONE_YET = (
    "no endpoints yet: a curator adds them (endpoint add NAME --preset original|professional, or the Endpoints page)"
)


def endpoint_line(endpoint: Endpoint) -> str:
    style = "Responses" if endpoint.api_style == "responses" else "Chat Completions"
    if endpoint.reasoning:
        how = f"reasoning, effort {endpoint.reasoning_effort or 'default'}"
    elif endpoint.temperature is not None:
        how = f"temperature {endpoint.temperature:g}"
    else:
        how = "temperature: the model's default"
    limit = f"{endpoint.max_output_tokens} output tokens" if endpoint.max_output_tokens else "no output limit"
    extras = [how, limit]
    if endpoint.system_message:
        extras.append("system message")
    if endpoint.structured_output:
        extras.append("JSON schema")
    verdict = endpoint_verdict(endpoint)
    standing = verdict.label if verdict.matches else f"differs from the reference ({'; '.join(verdict.differences)})"
    where = endpoint.base_url or "OpenAI"
    return f"{endpoint.name}\t{endpoint.model}\t{style}\t{', '.join(extras)}\t{where}\t{standing}"


def endpoint_lines() -> list[str]:
    endpoints = list(Endpoint.objects.order_by("name"))
    return [endpoint_line(e) for e in endpoints] if endpoints else [NONE_YET]
