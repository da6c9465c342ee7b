"""Selector: how far a run has come, for the run page, `grade --wait` and the run list."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Q, Sum
from django.utils import timezone

from grading.models import Grade, Response, Run

RATE_WINDOW_SECONDS = 30


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
        parts.append(f"{self.tokens:,} tokens")
        return " · ".join(parts)


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
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
        graded=Count("id", filter=Q(status=Grade.Status.GRADED)),
        failed=Count("id", filter=Q(status=Grade.Status.FAILED)),
        reused=Count("id", filter=Q(reused=True)),
        recent=Count("id", filter=Q(created__gte=since)),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
    )
    samples = {"n": 0, "prompt_tokens": None, "completion_tokens": None}
    failed_samples = 0
    if run.policy_config_id is not None:
        samples = Response.objects.filter(run=run).aggregate(
            n=Count("id"), prompt_tokens=Sum("prompt_tokens"), completion_tokens=Sum("completion_tokens")
        )
        failed_samples = run.batches.aggregate(n=Sum("failed_samples"))["n"] or 0
    active = run.is_active
    rate = None
    if active and run.started:
        window = min(RATE_WINDOW_SECONDS, (now - run.started).total_seconds())
        rate = grades["recent"] / window if window > 0 else None
    elif run.started and run.finished and run.finished > run.started:
        rate = (grades["graded"] + grades["failed"]) / (run.finished - run.started).total_seconds()
    return Progress(
        total=run.total_items,
        graded=grades["graded"],
        failed=grades["failed"],
        reused=grades["reused"],
        prompt_tokens=grades["prompt_tokens"] or 0,
        completion_tokens=grades["completion_tokens"] or 0,
        samples=samples["n"],
        sample_prompt_tokens=samples["prompt_tokens"] or 0,
        sample_completion_tokens=samples["completion_tokens"] or 0,
        failed_samples=failed_samples,
        rate=rate,
        active=active,
    )
