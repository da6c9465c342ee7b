"""`endpoint check`: one real grader request to an endpoint (a short conversation and one
criterion, in the endpoint's grading mode), and what its answer says about the key, the model,
the request's shape and the grader's verdict. It says "works" only when the answer holds a
verdict a run could store; its errors are read by the run's own reader
(grading.pipeline.provider_errors), so the check and a run never disagree."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import openai

from grading.endpoint_rules import base_url_problem, key_variable_problem
from grading.models import Endpoint, GraderConfig
from grading.pipeline.endpoint import CallTarget, EndpointConfigError
from grading.pipeline.endpoint_clients import client_for, close_clients
from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE, MalformedAnswer, conversation_block
from grading.pipeline.modes import DEFAULT, mode_of
from grading.pipeline.provider_errors import Action, ProviderError, read_error
from grading.pipeline.replies import EmptyAnswer, ErrorReply, NotACompletion, Reply, parse_reply
from healthbench_web.redact import endpoint_keys, redact

MESSAGES = [{"role": "user", "content": "Can I take ibuprofen with food?"}]
RESPONSE = "Yes. Taking ibuprofen with food or milk can lower the chance of an upset stomach."
CONVERSATION = conversation_block(MESSAGES, RESPONSE)
CRITERION = "Says that taking ibuprofen with food can reduce stomach upset."
POINTS = 5


@dataclass
class CheckResult:
    ok: bool
    lines: list[str] = field(default_factory=list)


def body_text(exc: openai.APIStatusError) -> str:
    try:
        return exc.response.text[:2000]
    except Exception:  # a body that cannot be read says nothing
        return ""


def check_target(endpoint: Endpoint) -> CallTarget:
    from grading.pipeline.run_launch import ACCESS_FIELDS, SNAPSHOT_FIELDS

    fields = {name: getattr(endpoint, source) for name, source in SNAPSHOT_FIELDS.items()}
    config = GraderConfig(**fields, **{name: getattr(endpoint, name) for name in ACCESS_FIELDS})
    config.endpoint_name = endpoint.name
    return CallTarget.of(config)


def check_request(target: CallTarget, mode: str, template: str) -> tuple[str, dict]:
    """The request a run's grader call would send, filled the way a run fills it: the run's
    grader template (the default one unless a stored one is named) for a criterion, the
    per-response prompt for a response."""
    return mode_of(mode).check_request(
        target, conversation=CONVERSATION, criterion=CRITERION, points=POINTS, template=template
    )


def _verdict(mode: str, reply: Reply, *, lenient: bool) -> str:
    """The grader's verdict as a run would read it; raises MalformedAnswer when there is none."""
    return mode_of(mode).check_verdict(reply, lenient=lenient)


def _refused(error: ProviderError, status: int, target: CallTarget) -> str:
    """What an error reply says is wrong, in the run's terms (the same reader and rules)."""
    code = f"{error.code} {error.type}".lower()
    if error.quota:
        return "the key works, but its account's quota or credit is spent"
    if status in (401, 403) or "invalid_api_key" in code or "api key not valid" in error.message.lower():
        return f"the key from {target.api_key_env or '(no key)'} was refused"
    if status == 404 or "model" in error.code.lower():
        return f"the key works, but the model {target.model!r} does not exist there (or this key cannot use it)"
    if error.content_filter:
        return "the provider's content filter refused the check's prompt"
    if error.action() is Action.FATAL:
        return "the key works and the model answers, but the request's shape was refused"
    if error.action() is Action.FAIL:
        return "the endpoint refused this call (a run would fail such calls one by one)"
    return f"the endpoint answered HTTP {status} (a run would retry)"


def not_callable(target: CallTarget) -> str | None:
    """Why no call can be made to the target (its key variable, URL or settings), or None."""
    problem = key_variable_problem(target.api_key_env) or base_url_problem(target.base_url)
    if problem:
        return f"not called: {problem}"
    try:
        target.check()
        target.api_key()
    except EndpointConfigError as exc:
        return f"not called: {exc}"
    return None


async def _call(target: CallTarget, mode: str, template: str) -> tuple[str, dict, bytes]:
    path, body = check_request(target, mode, template)
    try:
        raw = (await client_for(target).post(path, body)).content
    finally:
        await close_clients()
    return path, body, raw


def endpoint_check(*, endpoint: Endpoint, mode: str = DEFAULT, template: str = DEFAULT_TEMPLATE) -> CheckResult:
    """Ask the endpoint one grader question, as a run in `mode` with `template` would, and say
    what worked."""
    target = check_target(endpoint)
    where = endpoint.base_url or "https://api.openai.com/v1"
    problem = not_callable(target)
    if problem:
        return CheckResult(False, [problem])
    try:
        path, body, raw = asyncio.run(_call(target, mode, template))
        reply = parse_reply(raw, api_style=target.api_style, attempts=1)
    except (openai.APIStatusError, ErrorReply) as exc:
        status = exc.status if isinstance(exc, ErrorReply) else exc.status_code
        text = "" if isinstance(exc, ErrorReply) else body_text(exc)
        error = read_error(status, exc.body, text=text)
        said = redact(error.describe(endpoint.name), endpoint_keys())
        if isinstance(exc, ErrorReply):
            said += " (sent with HTTP 200)"
        return CheckResult(False, [f"{_refused(error, status, target)}: {said}"])
    except openai.APIConnectionError as exc:
        words = redact(str(exc.__cause__ or exc), endpoint_keys())
        return CheckResult(False, [f"could not reach {where}: {words}"])
    except (EmptyAnswer, NotACompletion) as exc:
        return CheckResult(False, [f"the endpoint answered, but not with a completion: {exc}"])
    usage = f"{reply.prompt_tokens} prompt + {reply.completion_tokens} output tokens"
    if reply.refused:
        why = "the provider's content filter withheld the answer" if reply.filtered else "the grader refused"
        return CheckResult(False, [f"{why}: {reply.content[:120]!r} ({usage})"])
    if reply.truncated:
        limit = target.max_tokens or "the model's own"
        return CheckResult(
            False,
            [
                f"the grader's answer was cut off at {limit} output tokens before its verdict ({usage}; "
                f"{reply.reasoning_tokens} spent reasoning): raise the endpoint's output limit"
            ],
        )
    try:
        verdict = _verdict(mode, reply, lenient=target.lenient_answers)
    except MalformedAnswer as exc:
        return CheckResult(False, [f"the grader answered, but without a verdict a run could read: {exc}: "
                                   f"{reply.content[:120]!r}"])  # fmt: skip
    sent = ", ".join(sorted(set(body) - {"messages", "input", "model"}))
    return CheckResult(
        True,
        [
            f"key: accepted ({target.api_key_env or 'no key needed'})",
            f"model: {target.model} answered",
            f"request shape: accepted ({path}; {sent or 'no other fields'})",
            f"verdict: {verdict}, read as a run reads it ({usage})",
        ],
    )
