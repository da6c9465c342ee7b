"""`endpoint check`: one real call to an endpoint, shaped as a run's grader call, and what its
answer says about the key, the model and the request's shape."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import openai

from grading.endpoint_rules import base_url_problem, key_variable_problem
from grading.models import Endpoint, GraderConfig
from grading.pipeline.client import client_for, close_clients
from grading.pipeline.endpoint import CallTarget, EndpointConfigError
from grading.pipeline.provider_errors import read_error
from grading.pipeline.replies import EmptyAnswer, NotACompletion, parse_reply
from grading.pipeline.request_shape import criterion_request
from healthbench_web.redact import endpoint_keys, redact

PROMPT = (
    "This is a connection check from HealthBench Studio. Answer with the JSON object "
    '{"explanation": "ok", "criteria_met": true} and nothing else.'
)


@dataclass
class CheckResult:
    ok: bool
    lines: list[str] = field(default_factory=list)


def _body_text(exc: openai.APIStatusError) -> str:
    try:
        return exc.response.text[:2000]
    except Exception:  # a body that cannot be read says nothing
        return ""


def _target(endpoint: Endpoint) -> CallTarget:
    from grading.pipeline.run_launch import SNAPSHOT_FIELDS

    config = GraderConfig(**{name: getattr(endpoint, source) for name, source in SNAPSHOT_FIELDS.items()})
    config.endpoint_name = endpoint.name
    return CallTarget.of(config)


async def _call(target: CallTarget) -> tuple[str, dict, bytes]:
    path, body = criterion_request(target, PROMPT)
    try:
        raw = await client_for(target).post(path, body=body, cast_to=bytes)
    finally:
        await close_clients()
    return path, body, raw


def endpoint_check(*, endpoint: Endpoint) -> CheckResult:
    """Call the endpoint once, as a grader call of a run would, and say what worked."""
    target = _target(endpoint)
    where = endpoint.base_url or "https://api.openai.com/v1"
    problem = key_variable_problem(target.api_key_env) or base_url_problem(target.base_url)
    if problem:
        return CheckResult(False, [f"not called: {problem}"])
    try:
        target.api_key()
    except EndpointConfigError as exc:
        return CheckResult(False, [f"not called: {exc}"])
    try:
        path, body, raw = asyncio.run(_call(target))
    except openai.APIStatusError as exc:
        error = read_error(exc.status_code, exc.body, text=_body_text(exc))
        said = redact(error.describe(endpoint.name), endpoint_keys())
        code = f"{error.code} {error.type}"
        if exc.status_code in (401, 403) or "invalid_api_key" in code:
            verdict = f"the key from {target.api_key_env or '(no key)'} was refused"
        elif exc.status_code == 404 or "model" in error.code:
            verdict = f"the key works, but the model {target.model!r} does not exist there (or this key cannot use it)"
        elif exc.status_code == 400:
            verdict = "the key works and the model answers, but the request's shape was refused"
        else:
            verdict = f"the endpoint answered HTTP {exc.status_code}"
        return CheckResult(False, [f"{verdict}: {said}"])
    except openai.APIConnectionError as exc:
        words = redact(str(exc.__cause__ or exc), endpoint_keys())
        return CheckResult(False, [f"could not reach {where}: {words}"])
    try:
        reply = parse_reply(raw, api_style=target.api_style, attempts=1)
    except (EmptyAnswer, NotACompletion) as exc:
        return CheckResult(False, [f"the endpoint answered, but not with a completion: {exc}"])
    sent = ", ".join(sorted(set(body) - {"messages", "input", "model"}))
    return CheckResult(
        True,
        [
            f"key: accepted ({target.api_key_env or 'no key needed'})",
            f"model: {target.model} answered",
            f"request shape: accepted ({path}; {sent or 'no other fields'})",
            f"answer: {reply.content[:120]!r} ({reply.prompt_tokens} prompt + {reply.completion_tokens} output tokens)",
        ],
    )
