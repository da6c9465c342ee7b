"""What a grading run will do before it starts: the request (RunSpec), the work it comes
to (Plan: grades per response or per conversation), and what that costs (Estimate).

The command and the launch page both build a RunSpec, show the Estimate, then launch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Sum
from django.db.models.functions import Length

from annotation.models import Criterion, Subset
from grading.models import Grade, Response, Run
from grading.pipeline.client import CHARS_PER_TOKEN
from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE, TemplateError, check_template, rendered_length

# Assumptions of the estimate, printed with it.
ANSWER_TOKENS = 80  # a grader's JSON answer: a sentence or two and a boolean
SAMPLED_RESPONSE_TOKENS = 400  # a policy model's reply, before we have it
MAX_CONCURRENCY = 1000


@dataclass(frozen=True)
class EndpointSpec:
    model: str
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 2048
    timeout: float = 60.0
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    def problems(self, what: str) -> list[str]:
        found = []
        if not self.model.strip():
            found.append(f"the {what} model is required")
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            found.append(f"the {what} base URL must start with http:// or https://")
        if not 0 <= self.temperature <= 2:
            found.append(f"the {what} temperature must be between 0 and 2")
        if self.max_tokens < 1:
            found.append(f"the {what} max tokens must be at least 1")
        if self.timeout <= 0:
            found.append(f"the {what} timeout must be positive")
        for name, value in (("requests", self.requests_per_minute), ("tokens", self.tokens_per_minute)):
            if value is not None and value < 1:
                found.append(f"the {what} {name} per minute must be at least 1 (or unset for no limit)")
        return found


@dataclass(frozen=True)
class RunSpec:
    """A grading run as asked for: grade the responses of `responses_from` again, or sample
    `samples` responses per conversation of `subset` from `policy` and grade those."""

    name: str
    grader: EndpointSpec
    template: str = DEFAULT_TEMPLATE
    concurrency: int = 16
    use_cache: bool = True
    responses_from: Run | None = None
    subset: Subset | None = None
    policy: EndpointSpec | None = None
    samples: int = 1
    # Scoring options of the run (its report, not its grades): see Run.scores_length_adjusted.
    length_adjusted: bool = False
    healthbench_professional: bool = False


class RunSpecError(ValueError):
    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def spec_check(spec: RunSpec) -> None:
    """Raise RunSpecError listing everything wrong with `spec`."""
    problems = []
    if not spec.name.strip():
        problems.append("the run needs a name")
    elif Run.objects.filter(name=spec.name).exists():
        problems.append(f"a run named {spec.name!r} already exists; choose another name")
    problems += spec.grader.problems("grader")
    try:
        check_template(spec.template)
    except TemplateError as exc:
        problems.append(str(exc))
    if not 1 <= spec.concurrency <= MAX_CONCURRENCY:
        problems.append(f"concurrency must be between 1 and {MAX_CONCURRENCY}")
    sampled = spec.policy is not None or spec.subset is not None
    if (spec.responses_from is not None) == sampled:
        problems.append("grade either the responses of an existing run, or a policy model's samples on a subset")
    if sampled:
        if spec.policy is None:
            problems.append("sampling needs a policy model")
        else:
            problems += spec.policy.problems("policy")
        if spec.subset is None:
            problems.append("sampling needs a subset")
        if spec.samples < 1:
            problems.append("samples must be at least 1")
    if problems:
        raise RunSpecError(problems)


@dataclass
class Plan:
    """The run's work in units a batch is made of: responses (grading another run's responses
    again) or conversations (sampling first). ``units[i]`` is (id, grades, prompt chars)."""

    by_conversation: bool
    units: list[tuple[int, int, int]] = field(default_factory=list)
    policy_calls: int = 0
    policy_prompt_chars: int = 0

    @property
    def grades(self) -> int:
        return sum(u[1] for u in self.units)


def run_plan(spec: RunSpec) -> Plan:
    """The work of a checked spec, from three aggregate queries at most."""
    overhead = rendered_length(spec.template, conversation_chars=0, item_chars=0)
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
        plan = Plan(by_conversation=False)
        for response_id, n, item_chars in per_response:
            chars = n * (overhead + conversation_chars[response_id] + 8) + (item_chars or 0)
            plan.units.append((response_id, n, chars))
        return plan
    assert spec.subset is not None and spec.policy is not None
    criteria = Criterion.objects.filter(conversation__memberships__subset=spec.subset)
    if spec.subset.only_cluster_criteria:
        criteria = criteria.filter(level=Criterion.Level.CLUSTER)
    per_conversation = (
        criteria.values_list("conversation_id")
        .annotate(n=Count("id"), item_chars=Sum(Length("text")), chars=Length("conversation__messages"))
        .order_by("conversation_id")
    )
    plan = Plan(by_conversation=True)
    response_chars = SAMPLED_RESPONSE_TOKENS * CHARS_PER_TOKEN
    for conversation_id, n, item_chars, chars in per_conversation:
        grades = n * spec.samples
        plan.units.append(
            (conversation_id, grades, grades * (overhead + chars + response_chars + 8) + item_chars * spec.samples)
        )
        plan.policy_calls += spec.samples
        plan.policy_prompt_chars += spec.samples * chars
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
        out.append(
            f"Grading: {self.grader_calls:,} grader calls on {self.responses:,} responses, about "
            f"{self.prompt_tokens:,} prompt tokens and {self.completion_tokens:,} completion tokens "
            f"(~{ANSWER_TOKENS} per answer; retries and re-asks come on top)."
        )
        if self.use_cache:
            out.append("Grades of identical earlier requests are reused, which can make it less.")
        return out


def plan_estimate(spec: RunSpec, plan: Plan) -> Estimate:
    calls = plan.grades
    return Estimate(
        grader_calls=calls,
        prompt_tokens=sum(u[2] for u in plan.units) // CHARS_PER_TOKEN,
        completion_tokens=calls * ANSWER_TOKENS,
        responses=plan.policy_calls if plan.by_conversation else len(plan.units),
        policy_calls=plan.policy_calls,
        policy_prompt_tokens=plan.policy_prompt_chars // CHARS_PER_TOKEN,
        policy_completion_tokens_max=plan.policy_calls * (spec.policy.max_tokens if spec.policy else 0),
        use_cache=spec.use_cache,
    )
