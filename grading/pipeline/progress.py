"""Selector: how far a run has come, for the run page, `grade --wait` and the run list: grades
and samples done and failed, usage and cost, and the samples that are refusals or were cut off
at their output limit (stored, graded and counted, never passed over in silence)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db.models import Count, Max, Q, Sum
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from grading.models import Grade, ProviderBatch, Response, Run, SampleFailure
from grading.pipeline.cost import Prices, cost_of
from grading.pipeline.modes import FALLBACK, MODES
from grading.pipeline.provider_errors import UNGRADABLE

RATE_WINDOW_SECONDS = 30


@dataclass(frozen=True)
class ProviderBatchState:
    """One provider batch of a batched run, as last polled."""

    batch_id: str
    status: str
    status_label: str
    round: int
    requests: int  # as the provider counted them (0 before it did)
    total: int
    completed: int
    failed: int
    collected: bool
    error: str = ""


@dataclass(frozen=True)
class Progress:
    total: int
    graded: int
    failed: int
    reused: int
    prompt_tokens: int
    completion_tokens: int
    samples: int
    sample_prompt_tokens: int
    sample_completion_tokens: int
    failed_samples: int
    rate: float | None  # grades per second, recently (or over the whole run once it ended)
    active: bool
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    sample_cached_tokens: int = 0
    sample_reasoning_tokens: int = 0
    grader_cost: Decimal | None = None  # dollars from the stored usage; None: no prices
    sample_cost: Decimal | None = None
    sampled: bool = False
    cache_write_tokens: int = 0
    sample_cache_write_tokens: int = 0
    refused_samples: int = 0  # stored as the policy's words, graded, marked
    truncated_samples: int = 0  # stored as far as they went, graded, marked
    output_limit: int | None = None  # the limit the cut-off samples hit
    calls: int = 0  # grader requests sent (retries included; per response, one per chunk)
    # Per response: criteria whose entry in the answer was unusable, graded by a call of their own.
    fallbacks: int = 0
    batch: bool = False  # graded through the provider's Batch API
    provider_batches: tuple[ProviderBatchState, ...] = ()

    @property
    def cost(self) -> Decimal | None:
        if self.grader_cost is None or (self.sampled and self.sample_cost is None):
            return None
        return self.grader_cost + (self.sample_cost or 0)

    @property
    def provider_batch_counts(self) -> dict[str, int]:
        """Provider batches by status, and their request counts added up."""
        counts: dict[str, int] = {}
        for state in self.provider_batches:
            counts[state.status] = counts.get(state.status, 0) + 1
        return counts

    @property
    def provider_batch_line(self) -> str:
        """The provider batches in one line: their states and request counts."""
        if not self.provider_batches:
            return "no provider batch sent yet" if self.batch else ""
        states = ", ".join(
            f"{n} {status.replace('_', ' ')}" for status, n in sorted(self.provider_batch_counts.items())
        )
        total = sum(s.total or s.requests for s in self.provider_batches)
        done = sum(s.completed for s in self.provider_batches)
        failed = sum(s.failed for s in self.provider_batches)
        return f"provider batches: {states}; requests {done:,} completed, {failed:,} failed of {total:,}"

    @property
    def cost_text(self) -> str:
        cost = self.cost
        return gettext("unknown (no prices configured for the endpoint)") if cost is None else f"${cost:,.2f}"

    @property
    def warning(self) -> str:
        """What a finished run with some failures must say beside its "done"."""
        parts = []
        if self.failed:
            failed = gettext("%(failed)s of %(total)s grades failed")
            parts.append(failed % {"failed": format(self.failed, ","), "total": format(self.total, ",")})
        if self.failed_samples:
            not_drawn = gettext("%(n)s samples could not be drawn")
            parts.append(not_drawn % {"n": format(self.failed_samples, ",")})
        if not parts:
            return ""
        return "; ".join(parts) + gettext(": they are missing from the report (never counted as not met).")

    @property
    def sample_notes(self) -> str:
        """What the run page, the API and `grade --wait` say about refused and cut-off samples:
        graded as they are, so a reader must know they are there."""
        parts = []
        if self.truncated_samples:
            n = self.truncated_samples
            if self.output_limit:
                cut = ngettext(
                    "%(n)s sample was cut off at the output limit of %(limit)s tokens and is graded as far as it"
                    " went (raise the policy endpoint's output limit to avoid it)",
                    "%(n)s samples were cut off at the output limit of %(limit)s tokens and are graded as far as"
                    " they went (raise the policy endpoint's output limit to avoid it)",
                    n,
                )
            else:
                cut = ngettext(
                    "%(n)s sample was cut off at the output limit and is graded as far as it went (raise the policy"
                    " endpoint's output limit to avoid it)",
                    "%(n)s samples were cut off at the output limit and are graded as far as they went (raise the"
                    " policy endpoint's output limit to avoid it)",
                    n,
                )
            parts.append(cut % {"n": format(n, ","), "limit": format(self.output_limit or 0, ",")})
        if self.refused_samples:
            n = self.refused_samples
            refused = ngettext(
                "%(n)s refusal by the policy model, graded as its answer",
                "%(n)s refusals by the policy model, graded as its answer",
                n,
            )
            parts.append(refused % {"n": format(n, ",")})
        return "; ".join(parts) + ("." if parts else "")

    @property
    def done(self) -> int:
        return self.graded + self.failed

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.done)

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0

    @property
    def seconds_left(self) -> float | None:
        if not self.active or not self.rate:
            return None
        return self.remaining / self.rate

    @property
    def time_left(self) -> str:
        return "" if self.seconds_left is None else duration(self.seconds_left)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens + self.sample_prompt_tokens + self.sample_completion_tokens

    def line(self) -> str:
        """One line for a terminal."""
        parts = [
            f"{self.done:,}/{self.total:,} ({self.percent:.1f}%)",
            f"{self.failed:,} failed",
            f"{self.reused:,} reused",
        ]
        if self.rate:
            parts.append(f"{self.rate:,.1f} grades/s")
        if self.time_left:
            parts.append(f"{self.time_left} left")
        if self.batch:
            parts.append(self.provider_batch_line)
        parts.append(f"{self.tokens:,} tokens")
        if self.cost is not None:
            parts.append(f"${self.cost:,.2f}")
        if self.fallbacks:
            parts.append(f"{self.fallbacks:,} fallbacks")
        if self.refused_samples:
            parts.append(f"{self.refused_samples:,} refused")
        if self.truncated_samples:
            parts.append(f"{self.truncated_samples:,} cut off")
        return " · ".join(parts)


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def run_progress(*, run: Run) -> Progress:
    """Two or three aggregate queries, whatever the size of the run."""
    now = timezone.now()
    since = now - timedelta(seconds=RATE_WINDOW_SECONDS)
    grades = Grade.objects.filter(run=run).aggregate(
        batched_prompt_tokens=Sum("prompt_tokens", filter=Q(batched=True)),
        batched_cached_tokens=Sum("cached_tokens", filter=Q(batched=True)),
        batched_completion_tokens=Sum("completion_tokens", filter=Q(batched=True)),
        graded=Count("id", filter=Q(status=Grade.Status.GRADED)),
        failed=Count("id", filter=Q(status=Grade.Status.FAILED)),
        reused=Count("id", filter=Q(reused=True)),
        calls=Sum("attempts"),
        # In a run of another mode, the grades asked alone (per criterion) are the fallbacks.
        fallbacks=Count(
            "id",
            filter=Q(mode=FALLBACK) & Q(run__grader_config__grading_mode__in=[n for n in MODES if n != FALLBACK]),
        ),
        recent=Count("id", filter=Q(created__gte=since)),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
        cached_tokens=Sum("cached_tokens"),
        reasoning_tokens=Sum("reasoning_tokens"),
        cache_write_tokens=Sum("cache_write_tokens"),
    )
    samples: dict = {"n": 0}
    failed_samples = 0
    if run.policy_config_id is not None:
        samples = Response.objects.filter(run=run).aggregate(
            n=Count("id"),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
            cached_tokens=Sum("cached_tokens"),
            reasoning_tokens=Sum("reasoning_tokens"),
            cache_write_tokens=Sum("cache_write_tokens"),
            refused=Count("id", filter=Q(refused=True)),
            truncated=Count("id", filter=Q(truncated=True)),
            output_limit=Max("output_limit"),
        )
        failed_samples = SampleFailure.objects.filter(run=run).count()
    active = run.is_active
    rate = None
    if active and run.started:
        window = min(RATE_WINDOW_SECONDS, (now - run.started).total_seconds())
        rate = grades["recent"] / window if window > 0 else None
    elif run.started and run.finished and run.finished > run.started:
        rate = (grades["graded"] + grades["failed"]) / (run.finished - run.started).total_seconds()

    def tokens(row: dict, name: str) -> int:
        return row.get(name) or 0

    return Progress(
        total=run.total_items,
        graded=grades["graded"],
        failed=grades["failed"],
        reused=grades["reused"],
        prompt_tokens=grades["prompt_tokens"] or 0,
        completion_tokens=grades["completion_tokens"] or 0,
        samples=samples["n"],
        sample_prompt_tokens=tokens(samples, "prompt_tokens"),
        sample_completion_tokens=tokens(samples, "completion_tokens"),
        failed_samples=failed_samples,
        rate=rate,
        active=active,
        cached_tokens=tokens(grades, "cached_tokens"),
        reasoning_tokens=tokens(grades, "reasoning_tokens"),
        sample_cached_tokens=tokens(samples, "cached_tokens"),
        sample_reasoning_tokens=tokens(samples, "reasoning_tokens"),
        grader_cost=_grader_cost(run, grades),
        sample_cost=cost_of(
            Prices.of(run.policy_config),
            prompt_tokens=tokens(samples, "prompt_tokens"),
            cached_tokens=tokens(samples, "cached_tokens"),
            completion_tokens=tokens(samples, "completion_tokens"),
        )
        if run.policy_config_id is not None
        else None,
        sampled=run.policy_config_id is not None,
        cache_write_tokens=tokens(grades, "cache_write_tokens"),
        sample_cache_write_tokens=tokens(samples, "cache_write_tokens"),
        refused_samples=tokens(samples, "refused"),
        truncated_samples=tokens(samples, "truncated"),
        output_limit=samples.get("output_limit"),
        calls=tokens(grades, "calls"),
        fallbacks=tokens(grades, "fallbacks"),
        batch=run.batch,
        provider_batches=_provider_batches(run) if run.batch else (),
    )


def _grader_cost(run: Run, grades: dict) -> Decimal | None:
    """Live answers at the grader's prices, answers through the provider's Batch API at its
    discount."""
    prices = Prices.of(run.grader_config)

    def part(prefix: str, prices: Prices, less: dict | None = None) -> Decimal | None:
        def n(name: str) -> int:
            return (grades.get(f"{prefix}{name}") or 0) - ((less or {}).get(f"batched_{name}") or 0)

        return cost_of(
            prices,
            prompt_tokens=n("prompt_tokens"),
            cached_tokens=n("cached_tokens"),
            completion_tokens=n("completion_tokens"),
        )

    live = part("", prices, less=grades)
    if not run.batch or live is None:
        return live
    discount = run.grader_config.batch_discount if run.grader_config else None
    batched = part("batched_", prices.batched(discount))
    return None if batched is None else live + batched


def _provider_batches(run: Run) -> tuple[ProviderBatchState, ...]:
    labels = dict(ProviderBatch.Status.choices)
    return tuple(
        ProviderBatchState(
            batch_id=row["batch_id"],
            status=row["status"],
            status_label=str(labels.get(row["status"], row["status"])),
            round=row["round"],
            requests=row["total"],
            total=row["total"],
            completed=row["completed"],
            failed=row["failed"],
            collected=row["collected"],
            error=row["error"],
        )
        for row in ProviderBatch.objects.filter(run=run)
        .order_by("run_batch__number", "round", "part")
        # Not the requests column: it holds every request's key, and the page asks every 2 s.
        .values("batch_id", "status", "round", "total", "completed", "failed", "collected", "error")
    )


@dataclass(frozen=True)
class Ungradable:
    """A conversation whose grades the provider refused (a content filter, the context length)."""

    prompt_id: str
    grades: int
    reason: str


def ungradable_conversations(*, run: Run, limit: int = 20) -> list[Ungradable]:
    """The conversations of `run` the grader's provider refuses to grade, most grades first."""
    rows = (
        Grade.objects.filter(run=run, status=Grade.Status.FAILED, error__startswith=UNGRADABLE)
        .values("response__conversation__prompt_id")
        .annotate(grades=Count("id"), reason=Max("error"))
        .order_by("-grades", "response__conversation__prompt_id")[:limit]
    )
    return [
        Ungradable(row["response__conversation__prompt_id"], row["grades"], row["reason"].removeprefix(UNGRADABLE))
        for row in rows
    ]
