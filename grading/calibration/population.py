"""Selector: the grader's side of a calibration, each scored response of a run with its score.

The score is the reference's per-example score (met points over positive points) clipped to
[0, 1], the same scale as the physicians' score of a sampled response, so that the difference
of the two means is the grader's bias on the scale the report shows.
"""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from grading.models import Run
from grading.reports import scoring
from grading.reports.selectors import run_grades_get

THEME = "theme:"


@dataclass(frozen=True)
class GraderScores:
    response_ids: npt.NDArray[np.int64]  # scored responses only, ascending
    scores: npt.NDArray[np.float64]  # clipped to [0, 1]
    themes: list[str]  # each response's theme tag ("" when its conversation has none)

    def by_id(self) -> dict[int, tuple[float, str]]:
        return {int(rid): (float(s), t) for rid, s, t in zip(self.response_ids, self.scores, self.themes, strict=True)}


def grader_scores(run: Run) -> GraderScores:
    grades = run_grades_get(run=run)
    metrics = scoring.score_grades(**grades.score_arrays())["metrics"]
    overall = metrics.get(scoring.OVERALL, np.full(grades.response_ids.size, np.nan))
    scored = ~np.isnan(overall)
    themes = np.full(grades.response_ids.size, "", dtype=object)
    for name, values in metrics.items():
        if name.startswith(THEME) and ":" not in name[len(THEME) :]:
            themes[~np.isnan(values) & (themes == "")] = name
    return GraderScores(
        response_ids=grades.response_ids[scored],
        scores=np.clip(overall[scored], 0.0, 1.0),
        themes=[str(t) for t in themes[scored]],
    )


def scored_population(run: Run) -> dict[str, list[int]]:
    """Theme -> ids of the run's scored responses: what a sample is drawn from."""
    population: dict[str, list[int]] = {}
    found = grader_scores(run)
    for rid, theme in zip(found.response_ids.tolist(), found.themes, strict=True):
        population.setdefault(theme, []).append(rid)
    return population
