"""Selector: two runs side by side, from the database."""

import numpy as np

from grading.models import Run
from grading.reports import scoring
from grading.reports.comparison import length_controlled_win_rate, metric_differences
from grading.reports.selectors import run_grades_get

# The comparison tables show the overall score and the theme and axis breakdowns.
SHOWN_PREFIXES = ("theme:", "axis:")


def _scored(run: Run):
    grades = run_grades_get(run=run)
    scores = scoring.score_grades(**grades.score_arrays())
    conversation = grades.conversation_ids[grades.response_conversation]
    return scores["metrics"], conversation, grades.response_length


def run_comparison(*, run_a: Run, run_b: Run, seed: int | None = 0) -> dict:
    metrics_a, conversation_a, length_a = _scored(run_a)
    metrics_b, conversation_b, length_b = _scored(run_b)
    shown = {
        name for name in set(metrics_a) | set(metrics_b) if name == scoring.OVERALL or name.startswith(SHOWN_PREFIXES)
    }
    differences = metric_differences(
        {k: v for k, v in metrics_a.items() if k in shown},
        {k: v for k, v in metrics_b.items() if k in shown},
        seed=seed,
    )
    win = length_controlled_win_rate(
        conversation_a=conversation_a,
        length_a=length_a,
        score_a=metrics_a.get(scoring.OVERALL, np.array([])),
        conversation_b=conversation_b,
        length_b=length_b,
        score_b=metrics_b.get(scoring.OVERALL, np.array([])),
    )
    return {
        "a": run_a.name,
        "b": run_b.name,
        "overall": differences.get(scoring.OVERALL),
        "themes": {k: v for k, v in differences.items() if k.startswith("theme:")},
        "axes": {k: v for k, v in differences.items() if k.startswith("axis:")},
        "length_controlled_win_rate": win,
        "shared_conversations": int(np.intersect1d(conversation_a, conversation_b).size),
    }
