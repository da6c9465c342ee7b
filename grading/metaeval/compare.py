"""Grader comparison document: two or more runs that graded the same physician-labelled items
(with different endpoints or grading modes), side by side. For each run: macro F1 against
physicians per consensus criterion and overall with bootstrap intervals, Cohen's κ, the
paired bootstrap difference in macro F1 against the first run, and what the run cost (calls,
input, cached and output tokens, dollars, wall time). The page, `compare_graders` and the
JSON download share it; the numbers come from grading.metaeval.agreement, chance and
grader_comparison.

The items are the first run's labelled items; another run's labels are matched to them by
(response, criterion), and an item it did not grade counts as unlabelled for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grading.metaeval import agreement
from grading.metaeval.chance import KAPPA, grader_kappa
from grading.metaeval.grader_comparison import OVERALL, paired_f1_differences
from grading.metaeval.selectors import run_labels
from grading.models import Run
from grading.pipeline.progress import run_progress

N_RESAMPLES = 1000
CONFIDENCE = 0.95
DEFAULT_SEED = 0
F1 = f"pairwise_model_{agreement.MACRO_F1}"


class ComparisonError(ValueError):
    pass


def _aligned(first, other) -> np.ndarray:
    """`other`'s grader labels on the items of `first` (NaN where it has none)."""
    index = {(int(r), int(c)): k for k, (r, c) in enumerate(zip(other.response_id, other.criterion_id, strict=True))}
    out = np.full(first.n_items, np.nan)
    for k, (r, c) in enumerate(zip(first.response_id, first.criterion_id, strict=True)):
        at = index.get((int(r), int(c)))
        if at is not None:
            out[k] = other.grader[at]
    return out


def _usage(run: Run) -> dict[str, Any]:
    progress = run_progress(run=run)
    seconds = (run.finished - run.started).total_seconds() if run.finished and run.started else None
    return {
        "calls": progress.calls,
        "input_tokens": progress.prompt_tokens,
        "cached_tokens": progress.cached_tokens,
        "output_tokens": progress.completion_tokens,
        "cost_usd": None if progress.grader_cost is None else f"{progress.grader_cost:.6f}",
        "seconds": seconds,
        "fallbacks": progress.fallbacks,
    }


def _how(run: Run) -> dict[str, Any]:
    config = run.grader_config
    if config is None:
        return {"endpoint": "", "model": "", "mode": "", "explanation_length": ""}
    return {
        "endpoint": config.endpoint_name or config.name,
        "model": config.model,
        "mode": config.grading_mode,
        "explanation_length": config.explanation_length,
    }


def _f1(point: dict, intervals: dict, scope: str) -> dict[str, Any]:
    name = f"{scope}: {F1}" if scope else F1
    value = point.get(name)
    interval: dict = intervals.get(name) or {}
    return {
        "value": None if value is None else value["value"],
        "n": 0 if value is None else value["n"],
        "low": interval.get("low"),
        "high": interval.get("high"),
    }


def graders_compare(*, runs: list[Run], seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The comparison document of `runs` (the first is the one the others are measured against)."""
    if len(runs) < 2:
        raise ComparisonError("compare two or more runs")
    if len({run.id for run in runs}) != len(runs):
        raise ComparisonError("each run can be compared once")
    data = [run_labels(run=run) for run in runs]
    first = data[0]
    if first.n_items == 0:
        raise ComparisonError(f"run {runs[0].name!r} graded no physician-labelled item")
    labels = first.labels
    graders = [first.grader, *(_aligned(first, d) for d in data[1:])]
    categories = list(labels.category_names)
    out_runs = []
    for k, (run, grader) in enumerate(zip(runs, graders, strict=True)):
        rng = np.random.default_rng([seed, k])
        point = agreement.grader_agreement(labels, grader)
        intervals = agreement.bootstrap_f1_intervals(
            labels, grader, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, seed=rng
        )
        kappa = grader_kappa(labels, grader, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, seed=rng)
        scopes = [OVERALL, *categories]

        entry: dict[str, Any] = {
            "name": run.name,
            **_how(run),
            "items_labelled": int((~np.isnan(grader)).sum()),
            "macro_f1": {scope or "overall": _f1(point, intervals, scope) for scope in scopes},
            "kappa": kappa.get(KAPPA),
            "usage": _usage(run),
        }
        if k:
            differences = paired_f1_differences(
                labels, graders[0], grader, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, seed=rng
            )
            entry["f1_difference_vs_first"] = {scope or "overall": differences.get(scope) for scope in scopes}
        out_runs.append(entry)
    return {
        "items": first.n_items,
        "physician_labels": int(labels.item.size),
        "categories": categories,
        "confidence": CONFIDENCE,
        "n_resamples": N_RESAMPLES,
        "seed": seed,
        "runs": out_runs,
    }
