"""What resuming an ended run will do, before it is confirmed: the grades it still lacks (and,
retrying, the failed ones graded again), the samples still to draw, and what that costs at the
tokens per grade the run has spent so far (or the launch estimate's assumptions before its
first grade)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Avg, Count, Q

from grading.models import Grade, Run, SampleFailure
from grading.pipeline.cost import Prices, cost_of
from grading.pipeline.modes.per_criterion import ANSWER_TOKENS
from grading.pipeline.provider_errors import UNGRADABLE


@dataclass(frozen=True)
class ResumeEstimate:
    missing: int  # grades never made
    failed: int  # failed grades graded again (retrying), else 0
    samples: int  # samples drawn again (retrying a sampling run)
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal | None
    measured: bool  # tokens from the run's own grades, not assumptions
    ungradable: int = 0  # failed grades the provider refused for their conversation: not retried

    @property
    def calls(self) -> int:
        return self.missing + self.failed

    def lines(self) -> list[str]:
        how = "at this run's tokens per grade so far"
        if not self.measured:
            cost = "not known before the run's first grade (the launch estimate gave the whole run's)"
        elif self.cost is None:
            cost = "unknown (the grader endpoint has no prices)"
        else:
            cost = f"about ${self.cost:,.2f}"
        lines = [
            f"{self.calls:,} grader call{'s' if self.calls != 1 else ''}: {self.missing:,} grade"
            f"{'s' if self.missing != 1 else ''} still missing"
            + (f", {self.failed:,} failed grade{'s' if self.failed != 1 else ''} graded again" if self.failed else ""),
        ]
        if self.ungradable:
            lines.append(
                f"{self.ungradable:,} failed grade{'s' if self.ungradable != 1 else ''} not retried: the provider "
                "refuses their conversations (a content filter or the context length), which no retry can fix"
            )
        if self.samples:
            lines.append(f"{self.samples:,} sample{'s' if self.samples != 1 else ''} drawn again")
        if self.measured:
            lines.append(f"about {self.prompt_tokens:,} prompt and {self.completion_tokens:,} output tokens ({how})")
        lines.append(f"cost: {cost}")
        return lines


def resume_estimate(*, run: Run, retry_failed: bool) -> ResumeEstimate:
    counts = Grade.objects.filter(run=run).aggregate(
        graded=Count("id", filter=Q(status=Grade.Status.GRADED)),
        failed=Count("id", filter=Q(status=Grade.Status.FAILED) & ~Q(error__startswith=UNGRADABLE)),
        ungradable=Count("id", filter=Q(status=Grade.Status.FAILED, error__startswith=UNGRADABLE)),
        prompt=Avg("prompt_tokens", filter=Q(status=Grade.Status.GRADED, prompt_tokens__isnull=False)),
        cached=Avg("cached_tokens", filter=Q(status=Grade.Status.GRADED, cached_tokens__isnull=False)),
        completion=Avg("completion_tokens", filter=Q(status=Grade.Status.GRADED, completion_tokens__isnull=False)),
    )
    failed = counts["failed"] if retry_failed else 0
    missing = max(0, run.total_items - counts["graded"] - counts["failed"] - counts["ungradable"])
    samples = SampleFailure.objects.filter(run=run).count() if retry_failed else 0
    calls = missing + failed
    measured = counts["prompt"] is not None
    prompt = round((counts["prompt"] or 0) * calls)
    completion = round((counts["completion"] if counts["completion"] is not None else ANSWER_TOKENS) * calls)
    cached = round((counts["cached"] or 0) * calls)
    cost = (
        cost_of(Prices.of(run.grader_config), prompt_tokens=prompt, cached_tokens=cached, completion_tokens=completion)
        if measured
        else None
    )
    ungradable = counts["ungradable"] if retry_failed else 0
    return ResumeEstimate(missing, failed, samples, prompt, completion, cost, measured, ungradable)
