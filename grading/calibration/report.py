"""Selector: a run's physician-calibrated score, from its sample's labels and its grades.

Read on demand, never stored with the run's report: the run's own numbers are a record that
never changes, while the calibration grows as physicians label. The physicians' score of a
sampled response is the reference's per-example score from their labels over every criterion the
run graded for it, clipped to [0, 1]; a physician counts for a response only once they have
labelled all of those criteria, and two physicians' scores are averaged (their disagreement is
reported). Labels of removed physicians never count.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from django.db.models import Count, IntegerField, Max, Q, Sum
from django.db.models.functions import Cast

from annotation.models import Physician, PhysicianLabel
from grading.calibration.population import grader_scores
from grading.calibration.ppi import Calibration, calibrate, calibrate_stratified
from grading.models import CalibrationSample, Grade, Run
from healthbench_web.shared_cache import once_per_version
from healthbench_web.spreadsheet import csv_text

REPORT_VERSION = 1


def physician_scores(sample: CalibrationSample) -> dict[int, list[float]]:
    """Response id -> the score each physician who labelled all its criteria gives it."""
    response_ids = list(sample.items.values_list("response_id", flat=True))
    rubric: dict[int, dict[int, int]] = defaultdict(dict)
    for rid, crit, points in Grade.objects.filter(
        run_id=sample.run_id, response_id__in=response_ids, criterion__isnull=False
    ).values_list("response_id", "criterion_id", "points"):
        rubric[rid][crit] = points
    labels: dict[tuple[int, int], dict[int, bool]] = defaultdict(dict)
    for pid, rid, crit, met in (
        PhysicianLabel.objects.filter(response_id__in=response_ids)
        .exclude(physician__status=Physician.Status.REMOVED)
        .values_list("physician_id", "response_id", "criterion_id", "met")
    ):
        labels[(rid, pid)][crit] = met
    scores: dict[int, list[float]] = defaultdict(list)
    for (rid, _pid), marks in sorted(labels.items()):
        criteria = rubric.get(rid, {})
        possible = sum(p for p in criteria.values() if p > 0)
        if not criteria or possible <= 0 or any(crit not in marks for crit in criteria):
            continue
        met_points = sum(p for crit, p in criteria.items() if marks[crit])
        scores[rid].append(min(max(met_points / possible, 0.0), 1.0))
    return dict(scores)


def _calibration(rows: list[tuple[float, float]], run_scores: np.ndarray) -> Calibration:
    physician = np.array([p for p, _ in rows], dtype=np.float64)
    grader = np.array([g for _, g in rows], dtype=np.float64)
    return calibrate(physician, grader, run_scores)


def _as_json(result: Calibration) -> dict[str, Any]:
    return result.as_dict()


def calibration_report(run: Run) -> dict[str, Any] | None:
    """The calibration of a run as plain data (report JSON, API, command), or None without a sample."""
    sample = CalibrationSample.objects.filter(run=run).first()
    if sample is None:
        return None
    graded = grader_scores(run)
    by_id = graded.by_id()
    items = list(sample.items.values_list("response_id", "stratum"))
    physicians = physician_scores(sample)
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    disagreements = []
    for rid, _stratum in items:
        if rid not in physicians or rid not in by_id:
            continue
        grader, theme = by_id[rid]
        found = physicians[rid]
        pairs[theme].append((float(np.mean(found)), grader))
        if len(found) == 2:
            disagreements.append(abs(found[0] - found[1]))
    run_by_theme: dict[str, list[float]] = defaultdict(list)
    for score, theme in zip(graded.scores.tolist(), graded.themes, strict=True):
        run_by_theme[theme].append(score)
    everything = [row for rows in pairs.values() for row in rows]
    labelled = len(everything)
    themes = {
        theme: _as_json(_calibration(pairs.get(theme, []), np.array(scores)))
        for theme, scores in sorted(run_by_theme.items())
        if theme
    }
    if sample.by_theme:
        overall = calibrate_stratified(
            {
                theme: ([p for p, _ in pairs.get(theme, [])], [g for _, g in pairs.get(theme, [])], scores)
                for theme, scores in run_by_theme.items()
            }
        )
    else:
        overall = _calibration(everything, graded.scores)
    return {
        "version": REPORT_VERSION,
        "method": "PPI++ mean (Angelopoulos, Duchi, Zrnic 2023), power-tuned; 95% interval with t(n - 2)",
        "design": {
            "size": sample.size,
            "seed": sample.seed,
            "by_theme": sample.by_theme,
            "physicians_per_response": sample.physicians_per_response,
            "drawn": sample.created.isoformat(),
        },
        "progress": {
            "sampled": len(items),
            "labelled": labelled,
            "complete": labelled == len(items),
        },
        "physician_disagreement": {
            "responses_with_two": len(disagreements),
            "mean_absolute_difference": float(np.mean(disagreements)) if disagreements else None,
        },
        "overall": _as_json(overall),
        "themes": themes,
    }


CSV_COLUMNS = (
    "scope",
    "calibrated",
    "low",
    "high",
    "se",
    "lam",
    "n",
    "n_run",
    "grader_only",
    "grader_only_low",
    "grader_only_high",
    "physician_only",
    "physician_only_low",
    "physician_only_high",
    "bias",
    "effective_n",
    "note",
)


def _csv_row(scope: str, part: dict[str, Any]) -> list[Any]:
    def bounds(key: str) -> list[Any]:
        found = part.get(key)
        return [found["low"], found["high"]] if found else ["", ""]

    def value(key: str) -> Any:
        found = part.get(key)
        return "" if found is None else found

    return [
        scope,
        value("estimate"),
        *bounds("interval"),
        value("se"),
        value("lam"),
        part["n"],
        part["n_run"],
        part["grader_only"],
        *bounds("grader_only_interval"),
        value("physician_only"),
        *bounds("physician_only_interval"),
        value("bias"),
        value("effective_n"),
        part["no_interval_reason"],
    ]


def calibration_csv(data: dict[str, Any]) -> str:
    """One row for the run, then one per theme (spreadsheet formulas neutralised)."""
    rows = [_csv_row("overall", data["overall"])]
    rows.extend(_csv_row(theme, part) for theme, part in data["themes"].items())
    return csv_text(CSV_COLUMNS, rows)


def _labels_fingerprint(sample: CalibrationSample) -> str:
    """Changes when a label of the sample is added, changed, or its physician removed."""
    stats = PhysicianLabel.objects.filter(response_id__in=sample.items.values("response_id")).aggregate(
        n=Count("id"),
        last=Max("id"),
        met=Sum(Cast("met", IntegerField())),
        removed=Count("id", filter=Q(physician__status=Physician.Status.REMOVED)),
    )
    return f"{stats['n']}-{stats['last'] or 0}-{stats['met'] or 0}-{stats['removed']}"


def calibration_report_cached(run: Run) -> dict[str, Any] | None:
    """calibration_report, computed once per state of the sample's labels (the run never moves)."""
    sample = CalibrationSample.objects.filter(run=run).first()
    if sample is None:
        return None
    key = f"calibration:v{REPORT_VERSION}:{run.code}:{sample.pk}:{run.report_version}:{_labels_fingerprint(sample)}"
    return once_per_version(key, 0, lambda: calibration_report(run))


def with_calibration(run: Run, document: dict[str, Any]) -> dict[str, Any]:
    """The run's report document with its calibration under one new key, when it has a sample.

    The reference's keys are untouched; the calibration grows as physicians label, the rest
    of the document never moves.
    """
    data = calibration_report_cached(run)
    return document if data is None else {**document, "calibration": data}
