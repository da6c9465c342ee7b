"""What a grading run will do before it starts: the request (RunRequest), the work it comes
to (Plan: grades per response or per conversation), and what that costs (Estimate), in
calls, tokens and dollars from the endpoints' prices.

The command and the launch page both build a RunRequest, show the Estimate, then launch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import Count, Sum
from django.db.models.functions import Length

from annotation.models import Criterion
from grading.endpoint_rules import endpoint_problems
from grading.models import Endpoint, Grade, Response, Run
from grading.pipeline.cost import Prices, cost_of
from grading.pipeline.grader_prompt import TemplateError, check_template
from grading.pipeline.modes import DEFAULT, MODES, mode_of
from grading.pipeline.modes.base import CACHE_MIN_TOKENS, CACHE_STEP_TOKENS
from grading.pipeline.physician_responses import no_physician_responses, physician_texts
from grading.pipeline.request_shape import CHARS_PER_TOKEN
from grading.pipeline.response_prompt import EXPLANATIONS
from grading.pipeline.run_request import RunRequest, RunSpecError
from grading.plans import labelled_rubric, rubric_drift

# Assumptions of the estimate, printed with it.
SAMPLED_RESPONSE_TOKENS = 400  # a policy model's reply, before we have it
MAX_CONCURRENCY = 1000
REASONING_TOKENS = 300  # a reasoning grader at low effort thinks before answering (varies widely)
# The answers' tokens and the prompt cache's steps are each grading mode's
# (grading.pipeline.modes): ANSWER_TOKENS is the per-criterion mode's.


def run_concurrency(spec: RunRequest) -> int:
    """The run's bound of calls in flight: as asked, within its endpoints' limits."""
    limits = [e.max_concurrency for e in (spec.grader, spec.policy) if e is not None and e.max_concurrency]
    return min([spec.concurrency, *limits])


def spec_check(spec: RunRequest) -> None:
    """Raise RunSpecError listing everything wrong with `spec`."""
    problems = []
    if not spec.name.strip():
        problems.append("the run needs a name")
    elif Run.objects.filter(name=spec.name).exists():
        problems.append(f"a run named {spec.name!r} already exists; choose another name")
    if spec.grader is None:
        problems.append("choose a grader endpoint (curators add them on the Endpoints page)")
    else:
        problems += [f"grader endpoint {spec.grader.name}: {p}" for p in _endpoint_problems(spec.grader)]
        if spec.batch and spec.grader.batch_discount is None:
            problems.append(
                f"grader endpoint {spec.grader.name} offers no Batch API (curators set its batch discount to offer one)"
            )
    try:
        check_template(spec.template)
    except TemplateError as exc:
        problems.append(str(exc))
    if spec.grading_mode not in MODES:
        problems.append(f"grading mode {spec.grading_mode!r} is not one of {', '.join(MODES)}")
    if spec.explanation_length and spec.explanation_length not in EXPLANATIONS:
        problems.append(f"explanation length {spec.explanation_length!r} is not one of {', '.join(EXPLANATIONS)}")
    elif spec.explanation_length and spec.grading_mode in MODES and not mode_of(spec.grading_mode).takes_explanation:
        problems.append("the explanation length is a setting of the per-response mode")
    if not 1 <= spec.concurrency <= MAX_CONCURRENCY:
        problems.append(f"concurrency must be between 1 and {MAX_CONCURRENCY}")
    # A subset without a policy is the physicians' responses' when they are asked for.
    sampled = spec.policy is not None or (spec.subset is not None and not spec.physician_responses)
    if (spec.responses_from is not None) + sampled + spec.labelled + spec.physician_responses != 1:
        problems.append(
            "grade either the responses of an existing run, a policy model's samples on a subset, "
            "the physicians' responses on a subset, or the physician-labelled items"
        )
    if spec.physician_responses and spec.subset is None:
        problems.append("grading the physicians' responses needs a subset (the one their Professional rows are in)")
    elif spec.physician_responses and spec.samples != 1:
        problems.append("the physicians' responses are one per conversation: samples do not apply")
    elif spec.physician_responses and spec.subset is not None and not physician_texts(spec.subset):
        problems.append(no_physician_responses(spec.subset))
    if spec.rubric_changes and spec.responses_from is None:
        problems.append("grading the rubric changes needs the run they changed since (responses_from)")
    if sampled:
        if spec.policy is None:
            problems.append("sampling needs a policy endpoint")
        else:
            problems += [f"policy endpoint {spec.policy.name}: {p}" for p in _endpoint_problems(spec.policy)]
        if spec.subset is None:
            problems.append("sampling needs a subset")
        if spec.samples < 1:
            problems.append("samples must be at least 1")
    if problems:
        raise RunSpecError(problems)


def _endpoint_problems(endpoint: Endpoint) -> list[str]:
    # Not resolved here (a launch should not wait on DNS): the worker resolves and checks
    # again before its first call, and fails the run at once on a host that breaks the rules.
    return endpoint_problems(base_url=endpoint.base_url, key_variable=endpoint.key_variable, resolve=False)


@dataclass
class Plan:
    """The run's work in units a batch is made of: responses (grading another run's responses
    again) or conversations (sampling first). ``units[i]`` is (id, grades, prompt chars)."""

    by_conversation: bool
    units: list[tuple[int, int, int]] = field(default_factory=list)
    policy_calls: int = 0
    policy_prompt_chars: int = 0
    # Prompt characters a provider's prompt cache is expected to serve: every call about a
    # response after its first repeats the prefix (instructions, conversation, response).
    cacheable_chars: int = 0
    # A run of rubric changes: the criteria it grades per conversation (Run.plan_rubric).
    rubric: dict[str, list[list]] | None = None
    grading_mode: str = DEFAULT
    calls: int = 0  # grader calls (per response: chunks of at most CRITERIA_PER_CALL criteria)

    @property
    def grades(self) -> int:
        return sum(u[1] for u in self.units)


class _Prompts:
    """Grader calls and prompt characters for one response of `n` criteria, in the spec's mode."""

    def __init__(self, spec: RunRequest):
        self.mode = spec.grading_mode
        self.template = spec.template
        self.explanation = spec.explanation
        self.cost = mode_of(spec.grading_mode)
        self.overhead = self.cost.prompt_overhead(spec.template, self.explanation)

    def of(self, n: int, conversation_chars: int, item_chars: int) -> tuple[int, int, int]:
        """(calls, prompt chars, cacheable chars). ``item_chars``: the criteria's texts."""
        return self.cost.calls_and_chars(
            n,
            conversation_chars=conversation_chars,
            item_chars=item_chars,
            overhead=self.overhead,
            template=self.template,
            explanation=self.explanation,
        )


def run_plan(spec: RunRequest) -> Plan:
    """The work of a checked spec, from three aggregate queries at most."""
    prompts = _Prompts(spec)
    if spec.labelled:
        return _labelled_plan(prompts)
    if spec.responses_from is not None and spec.rubric_changes:
        return _changes_plan(spec, prompts)
    if spec.physician_responses:
        return _physician_plan(spec, prompts)
    if spec.responses_from is not None:
        # Each response is graded on the criteria the source run graded it on.
        per_response = (
            Grade.objects.filter(run=spec.responses_from)
            .values_list("response_id")
            .annotate(n=Count("id"), item_chars=Sum(Length("criterion_text")))
            .order_by("response_id")
        )
        conversation_chars = dict(
            Response.objects.filter(id__in=Grade.objects.filter(run=spec.responses_from).values("response_id"))
            .annotate(chars=Length("conversation__messages") + Length("text"))
            .values_list("id", "chars")
            .order_by()
        )
        return responses_plan(
            spec, ((rid, n, conversation_chars[rid], item_chars or 0) for rid, n, item_chars in per_response)
        )
    if spec.subset is None or spec.policy is None:
        raise RunSpecError(["a run samples new responses only with a subset and a policy endpoint"])
    criteria = Criterion.objects.filter(conversation__memberships__subset=spec.subset)
    if spec.subset.only_cluster_criteria:
        criteria = criteria.filter(level=Criterion.Level.CLUSTER)
    per_conversation = (
        criteria.values_list("conversation_id")
        .annotate(n=Count("id"), item_chars=Sum(Length("text")), chars=Length("conversation__messages"))
        .order_by("conversation_id")
    )
    plan = Plan(by_conversation=True, grading_mode=spec.grading_mode)
    response_chars = SAMPLED_RESPONSE_TOKENS * CHARS_PER_TOKEN
    for conversation_id, n, item_chars, chars in per_conversation:
        calls, prompt_chars, cacheable = prompts.of(n, chars + response_chars, item_chars or 0)
        plan.units.append((conversation_id, n * spec.samples, prompt_chars * spec.samples))
        plan.calls += calls * spec.samples
        plan.cacheable_chars += spec.samples * cacheable
        plan.policy_calls += spec.samples
        plan.policy_prompt_chars += spec.samples * chars
    return plan


def _physician_plan(spec: RunRequest, prompts: _Prompts) -> Plan:
    """Each conversation of the subset that has a physician response, on its rubric: planned
    by conversation, as a sampled run is (the responses are made or found at launch, and the
    run's units become them: grading.pipeline.run_launch), with no policy call."""
    if spec.subset is None:
        raise RunSpecError(["grading the physicians' responses needs a subset"])
    texts = physician_texts(spec.subset)
    # Through the membership, not a list of ids (a subset can hold thousands): the rows
    # without a physician response are dropped below.
    criteria = Criterion.objects.filter(conversation__memberships__subset=spec.subset)
    if spec.subset.only_cluster_criteria:
        criteria = criteria.filter(level=Criterion.Level.CLUSTER)
    per_conversation = (
        criteria.values_list("conversation_id")
        .annotate(n=Count("id"), item_chars=Sum(Length("text")), chars=Length("conversation__messages"))
        .order_by("conversation_id")
    )
    plan = Plan(by_conversation=True, grading_mode=spec.grading_mode)
    for conversation_id, n, item_chars, chars in per_conversation:
        if conversation_id not in texts:
            continue
        calls, prompt_chars, cacheable = prompts.of(n, chars + len(texts[conversation_id]), item_chars or 0)
        plan.units.append((conversation_id, n, prompt_chars))
        plan.calls += calls
        plan.cacheable_chars += cacheable
    return plan


def responses_plan(spec: RunRequest, responses: Iterable[tuple[int, int, int, int]]) -> Plan:
    """The plan of grading given responses: per response (id, criteria, characters of its
    conversation's messages as stored JSON plus its text, characters of its criteria's texts).
    run_plan reads these from the database; the grading modes benchmark passes its own."""
    prompts = _Prompts(spec)
    plan = Plan(by_conversation=False, grading_mode=spec.grading_mode)
    for response_id, n, conversation_chars, item_chars in responses:
        calls, chars, cacheable = prompts.of(n, conversation_chars, item_chars)
        plan.units.append((response_id, n, chars))
        plan.calls += calls
        plan.cacheable_chars += cacheable
    return plan


def _changes_plan(spec: RunRequest, prompts: _Prompts) -> Plan:
    """Each response of the source run on its conversation's criteria added or edited since."""
    source = spec.responses_from
    if source is None:
        raise RunSpecError(["grading the rubric changes needs the run they changed since (responses_from)"])
    changes = rubric_drift(source).changes
    plan = Plan(
        by_conversation=False,
        grading_mode=spec.grading_mode,
        rubric={str(c): items for c, items in sorted(changes.items())},
    )
    responses = (
        Response.objects.filter(
            id__in=Grade.objects.filter(run=source).values("response_id"), conversation_id__in=list(changes)
        )
        .annotate(chars=Length("conversation__messages") + Length("text"))
        .values_list("id", "conversation_id", "chars")
        .order_by("id")
    )
    for response_id, conversation_id, conversation_chars in responses:
        items = changes[conversation_id]
        calls, chars, cacheable = prompts.of(len(items), conversation_chars, sum(len(item[1]) for item in items))
        plan.units.append((response_id, len(items), chars))
        plan.calls += calls
        plan.cacheable_chars += cacheable
    return plan


def _labelled_plan(prompts: _Prompts) -> Plan:
    """Each physician-labelled response on the consensus criteria it was labelled on."""
    rubric = labelled_rubric()
    plan = Plan(by_conversation=False, grading_mode=prompts.mode, rubric={str(r): v for r, v in rubric.items()})
    conversation_chars = dict(
        Response.objects.filter(id__in=list(rubric))
        .annotate(chars=Length("conversation__messages") + Length("text"))
        .values_list("id", "chars")
        .order_by()
    )
    for response_id, items in rubric.items():
        calls, chars, cacheable = prompts.of(
            len(items), conversation_chars.get(response_id, 0), sum(len(item[1]) for item in items)
        )
        plan.units.append((response_id, len(items), chars))
        plan.calls += calls
        plan.cacheable_chars += cacheable
    return plan


@dataclass(frozen=True)
class Estimate:
    grader_calls: int
    prompt_tokens: int
    completion_tokens: int
    responses: int
    policy_calls: int = 0
    policy_prompt_tokens: int = 0
    policy_completion_tokens_max: int = 0
    use_cache: bool = True
    cached_share: float = 0.0  # of the grader's prompt tokens, expected from the provider's prompt cache
    reasoning_tokens: int = 0  # of the completion tokens, expected to be spent reasoning
    grader_cost: Decimal | None = None  # dollars; None: the endpoint has no prices
    policy_cost: Decimal | None = None
    grader_endpoint: str = ""
    policy_endpoint: str = ""
    concurrency: int = 0
    concurrency_asked: int = 0
    grading_mode: str = DEFAULT
    explanation_length: str = ""
    grades: int = 0
    batch_discount: Decimal | None = None  # set for a batched run: the share off the grader's prices
    criteria: str = ""  # which criteria of each response it grades (criteria_graded)

    @property
    def cost(self) -> Decimal | None:
        """Dollars for the whole run; None when any endpoint it calls has no prices."""
        if self.grader_cost is None or (self.policy_calls and self.policy_cost is None):
            return None
        return self.grader_cost + (self.policy_cost or 0)

    @property
    def total_tokens(self) -> int:
        return (
            self.prompt_tokens + self.completion_tokens + self.policy_prompt_tokens + self.policy_completion_tokens_max
        )

    def lines(self) -> list[str]:
        out = []
        if self.policy_calls:
            out.append(
                f"Sampling: {self.policy_calls:,} policy calls, about {self.policy_prompt_tokens:,} prompt tokens "
                f"and at most {self.policy_completion_tokens_max:,} completion tokens."
            )
        out.append(mode_of(self.grading_mode).estimate_line(self))
        if self.criteria:
            out.append(f"Criteria graded: {self.criteria}.")
        if self.reasoning_tokens:
            out.append(
                f"The grader is a reasoning model: about {REASONING_TOKENS} reasoning tokens per answer are "
                "included in the completion tokens (an assumption; the effort setting moves it a lot)."
            )
        out.append(
            f"Assumed: the provider's prompt cache serves {self.cached_share:.0%} of the grader's prompt tokens "
            "(each response's shared prompt prefix, in steps of "
            f"{CACHE_STEP_TOKENS}, on every call about it after the first, when {CACHE_MIN_TOKENS:,}+ tokens)."
        )
        if self.batch_discount is not None:
            out.append(
                f"Through the provider's Batch API: grading at {self.batch_discount:.0%} off the grader's prices, "
                "results within 24 hours."
            )
        out.append(self.cost_line())
        if self.concurrency and self.concurrency < self.concurrency_asked:
            out.append(f"Concurrency capped at {self.concurrency} by the endpoint's limit.")
        if self.use_cache:
            out.append("Grades of identical earlier requests are reused, which can make it less.")
        return out

    def cost_line(self) -> str:
        missing = [
            name
            for name, cost, used in (
                (self.grader_endpoint, self.grader_cost, True),
                (self.policy_endpoint, self.policy_cost, bool(self.policy_calls)),
            )
            if used and cost is None
        ]
        if missing:
            return (
                f"Cost: unknown — no prices are configured for {', '.join(missing)} "
                "(curators set them on the endpoint)."
            )
        if self.policy_calls:
            return (
                f"Cost: about ${self.cost:,.2f} at most (grading about ${self.grader_cost:,.2f}; sampling at most "
                f"${self.policy_cost:,.2f}, if every reply used its whole token allowance), at the endpoints' prices "
                "per million tokens."
            )
        return f"Cost: about ${self.cost:,.2f}, at the endpoint's prices per million tokens."


def criteria_graded(spec: RunRequest) -> str:
    """Which criteria of each response a run grades, in words for its estimate: a Consensus
    subset grades only the cluster criteria, whatever its name."""
    if spec.labelled:
        return "the consensus criteria physicians labelled on each response"
    if spec.responses_from is not None and spec.rubric_changes:
        return "the criteria added or edited since the source run graded them"
    if spec.responses_from is not None:
        return f"the criteria {spec.responses_from.name} graded each response on"
    if spec.physician_responses and spec.subset is not None:
        cluster = " (its level:cluster criteria only: a Consensus subset)" if spec.subset.only_cluster_criteria else ""
        return f"the physician response of each conversation of {spec.subset.name} that has one, on its rubric{cluster}"
    if spec.subset is not None and spec.subset.only_cluster_criteria:
        return f"the level:cluster criteria only ({spec.subset.name} is a Consensus subset)"
    return "every criterion of each conversation's rubric"


def plan_estimate(spec: RunRequest, plan: Plan) -> Estimate:
    if spec.grader is None:
        raise RunSpecError(["choose a grader endpoint"])
    calls = plan.calls
    prompt_chars = sum(u[2] for u in plan.units)
    prompt_tokens = prompt_chars // CHARS_PER_TOKEN
    cached_share = plan.cacheable_chars / prompt_chars if prompt_chars else 0.0
    reasoning = calls * REASONING_TOKENS if spec.grader.reasoning else 0
    completion_tokens = answer_tokens(plan.grading_mode, spec.explanation, calls=calls, grades=plan.grades) + reasoning
    policy_prompt = plan.policy_prompt_chars // CHARS_PER_TOKEN
    # With no output limit sent, the bound is unknown: a typical reply's length stands in.
    policy_limit = (spec.policy.max_output_tokens or SAMPLED_RESPONSE_TOKENS) if spec.policy else 0
    policy_completion = plan.policy_calls * policy_limit
    return Estimate(
        grader_calls=calls,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        # Planned by conversation: a response per sample, or the one physician response of each.
        responses=plan.policy_calls if plan.policy_calls else len(plan.units),
        policy_calls=plan.policy_calls,
        policy_prompt_tokens=policy_prompt,
        policy_completion_tokens_max=policy_completion,
        use_cache=spec.use_cache,
        cached_share=cached_share,
        reasoning_tokens=reasoning,
        grader_cost=cost_of(
            Prices.of(spec.grader).batched(spec.grader.batch_discount if spec.batch else None),
            prompt_tokens=prompt_tokens,
            cached_tokens=int(prompt_tokens * cached_share),
            completion_tokens=completion_tokens,
        ),
        policy_cost=cost_of(
            Prices.of(spec.policy), prompt_tokens=policy_prompt, cached_tokens=0, completion_tokens=policy_completion
        )
        if spec.policy
        else None,
        grader_endpoint=spec.grader.name,
        policy_endpoint=spec.policy.name if spec.policy else "",
        criteria=criteria_graded(spec),
        concurrency=run_concurrency(spec),
        concurrency_asked=spec.concurrency,
        grading_mode=plan.grading_mode,
        explanation_length=spec.explanation if mode_of(plan.grading_mode).takes_explanation else "",
        grades=plan.grades,
        batch_discount=spec.grader.batch_discount if spec.batch else None,
    )


def answer_tokens(mode: str, explanation: str, *, calls: int, grades: int) -> int:
    """The grader's answers, reasoning aside, as the mode counts them."""
    return mode_of(mode).answer_tokens(explanation, calls=calls, grades=grades)
