"""Selector: two runs side by side, from the database."""

import numpy as np
import numpy.typing as npt

from grading.models import Run
from grading.reports import scoring
from grading.reports.comparison import length_controlled_win_rate, metric_differences, shared_prompts
from grading.reports.report import length_adjustment
from grading.reports.selectors import run_grades_get

# The comparison tables show the overall score and the theme and axis breakdowns.
SHOWN_PREFIXES = ("theme:", "axis:")
OVERALL_ADJUSTED = scoring.OVERALL + scoring.LENGTH_ADJUSTED


def _scored(run: Run) -> tuple[dict[str, npt.NDArray[np.float64]], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    grades = run_grades_get(run=run)
    scores = scoring.score_grades(**grades.score_arrays())
    conversation = grades.conversation_ids[grades.response_conversation]
    metrics = {k: v for k, v in scores["metrics"].items() if k == scoring.OVERALL or k.startswith(SHOWN_PREFIXES)}
    adjustment = length_adjustment(run)
    if adjustment is not None:
        # Each run with its own constants: the report of each run says which.
        metrics[OVERALL_ADJUSTED] = scoring.length_adjusted(
            metrics[scoring.OVERALL],
            grades.response_length,
            centre=adjustment["centre"],
            penalty=adjustment["penalty_per_500"],
        )
    return metrics, conversation, grades.response_length


def run_comparison(*, run_a: Run, run_b: Run, seed: int | None = 0) -> dict:
    """Paired differences B - A on the prompts both runs graded, and B's length-controlled win rate."""
    metrics_a, conversation_a, length_a = _scored(run_a)
    metrics_b, conversation_b, length_b = _scored(run_b)
    differences = metric_differences(metrics_a, conversation_a, metrics_b, conversation_b, seed=seed)
    win = length_controlled_win_rate(
        conversation_a=conversation_a,
        length_a=length_a,
        score_a=metrics_a.get(scoring.OVERALL, np.array([])),
        conversation_b=conversation_b,
        length_b=length_b,
        score_b=metrics_b.get(scoring.OVERALL, np.array([])),
    )
    # One count of shared prompts for the whole page: the prompts both runs scored, which the
    # paired differences are over (a response left out of a run's score pairs with nothing).
    scored_a = ~np.isnan(metrics_a.get(scoring.OVERALL, np.full(conversation_a.size, np.nan)))
    scored_b = ~np.isnan(metrics_b.get(scoring.OVERALL, np.full(conversation_b.size, np.nan)))
    prompts = shared_prompts(conversation_a[scored_a], conversation_b[scored_b])
    prompts["responses_unscored_a"] = int((~scored_a).sum())
    prompts["responses_unscored_b"] = int((~scored_b).sum())
    return {
        "a": run_a.name,
        "b": run_b.name,
        "overall": differences.get(scoring.OVERALL),
        "overall_length_adjusted": differences.get(OVERALL_ADJUSTED),
        "themes": {k: v for k, v in differences.items() if k.startswith("theme:")},
        "axes": {k: v for k, v in differences.items() if k.startswith("axis:")},
        "length_controlled_win_rate": win,
        "prompts": prompts,
        "shared_conversations": prompts["shared"],
    }
