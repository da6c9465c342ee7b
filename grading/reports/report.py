"""A run's score report: the one function the command, the report page and the downloads call.

The report is a JSON-ready dict::

    {"score": float | None,                 # clipped mean of the scored responses
     "metrics": {...},                      # simple-evals names, see below
     "worst_at_k": {"1": float, ...},       # expected worst score among k samples of a prompt
     "consensus_error_rates": {"cluster:...": {"error_rate", "n_errors", "n_graded", "n_missing"}},
     "length_score_correlation": float | None,
     "counts": {...},                       # grades graded / failed / missing, responses scored / left out,
                                            # responses that are refusals / were cut off (graded as they are)
     "reused": int,                         # grades taken over from an earlier run (Grade.reused)
     "length_adjustment": None | {"centre": int, "penalty_per_500": float},
     "bootstrap": {"method": str, "description": str},  # how the :bootstrap_std figures were drawn (Run.bootstrap)
     "grader": None | {...}}                # how the grader compares with the reference's
                                            # (grading.reports.grader_marks); None when imported

``metrics`` has exactly the keys simple-evals writes in its results file: ``overall_score``,
every example tag (``theme:...``) and rubric tag (``axis:...``, ``cluster:...``, ``level:...``),
each with ``:n_samples`` and ``:bootstrap_std``, plus its stray ``score:n_samples`` and
``score:bootstrap_std`` (see grading.reports.scoring.reference_summary).

A response with a grade that failed, or with fewer grade rows than the criteria it should
have been graded on (missing; see grading.reports.selectors), is left out of every score and
counted, never scored as "not met".

A run scored with HealthBench Professional's length adjustment (Run.scores_length_adjusted)
also has ``overall_score_length_adjusted`` and ``<tag>_length_adjusted`` for every example
tag (theme, physician_agreed_category) and axis in ``metrics``, each with ``:n_samples`` and ``:bootstrap_std`` (see
grading.reports.scoring.length_adjusted), and ``length_adjustment`` names the constants used.
"""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from grading.models import Grade, GradingMode, Run, StoredReport
from grading.reports import scoring, stored
from grading.reports.bootstrap import BOOTSTRAP_LABELS
from grading.reports.grader_marks import grader_mark
from grading.reports.selectors import RunGrades, run_grades_get
from healthbench_web.shared_cache import once_per_version
from healthbench_web.spreadsheet import csv_text

DEFAULT_SEED = 0
# What run_report's document holds: its keys and those of its counts (grading.reports.stored's
# document_keys). The stored and cached report's version is derived from this and from
# REPORT_BUILDER, so a report that gains a key reaches every finished run: it is computed anew
# rather than read back without it. tests/test_report_version.py fails on a key missing here.
REPORT_SCHEMA = (
    "bootstrap",
    "consensus_error_rates",
    "counts",
    "counts.examples",
    "counts.examples_incomplete",
    "counts.examples_left_out",
    "counts.examples_scored",
    "counts.examples_unscorable",
    "counts.failed",
    "counts.graded",
    "counts.grades",
    "counts.missing",
    "counts.refusals",
    "counts.truncated",
    "grader",
    "length_adjustment",
    "length_score_correlation",
    "metrics",
    "reused",
    "score",
    "worst_at_k",
)
# Raise it when a value is computed differently under the same keys.
REPORT_BUILDER = 4
REPORT_VERSION = stored.document_version("run-report", REPORT_BUILDER, REPORT_SCHEMA)
CSV_COLUMNS = ("name", "value", "n_samples", "bootstrap_std")


class ExampleStatus:
    SCORED = "scored"
    INCOMPLETE = "incomplete"  # a grade failed or is missing
    UNSCORABLE = "unscorable"  # complete, but no criterion with positive points


# RunReport keeps each response's status as an index into this: a byte per response, not a
# string object, which keeps a paper-size report small to store and quick to read back.
STATUSES = (ExampleStatus.SCORED, ExampleStatus.INCOMPLETE, ExampleStatus.UNSCORABLE)


@dataclass(frozen=True)
class RunReport:
    data: dict  # the JSON report
    # Responses from worst to best score, unscored ones last: what the report page pages through.
    ranked_response_ids: npt.NDArray[np.int64]
    ranked_scores: npt.NDArray[np.float64]  # NaN when not scored
    ranked_status_codes: npt.NDArray[np.uint8]  # indices into STATUSES
    # The run's report_version it was computed at: a stale report served while the next one is
    # computed says which step it shows.
    version: int = 0

    def ranked_status(self, positions: slice) -> list[str]:
        return [STATUSES[code] for code in self.ranked_status_codes[positions].tolist()]


def length_adjustment(run: Run) -> dict | None:
    """The constants a run's report adjusts with, or None when it does not."""
    if not run.scores_length_adjusted:
        return None
    return {"centre": run.length_centre, "penalty_per_500": run.length_penalty}


def _report_data(
    grades: RunGrades,
    scores: scoring.ResponseScores,
    seed: int | None,
    adjustment: dict | None,
    bootstrap: str = scoring.PER_METRIC,
) -> dict:
    overall = scores["metrics"][scoring.OVERALL]
    if scores["n_scored"]:
        columns = dict(scores["metrics"])
        if adjustment is not None:
            columns |= scoring.length_adjusted_columns(
                columns,
                grades.response_length,
                centre=adjustment["centre"],
                penalty=adjustment["penalty_per_500"],
            )
        summary = scoring.reference_summary(scoring.aggregate_columns(columns, seed=seed, method=bootstrap))
        score = summary.pop("score")
    else:
        summary, score = {}, None
    worst = scoring.worst_at_k(overall, grades.response_conversation)
    present = np.bincount(grades.grade_response, minlength=grades.response_ids.size)
    missing = 0 if grades.expected_grades is None else int((grades.expected_grades - present).sum())
    n_failed = int((grades.grade_met == scoring.MISSING).sum())
    return {
        "score": score,
        "metrics": summary,
        "worst_at_k": {str(k): value for k, value in worst.items()},
        "consensus_error_rates": scoring.criterion_error_rates(
            grade_criterion=grades.grade_criterion,
            grade_points=grades.grade_points,
            grade_met=grades.grade_met,
            criterion_tags=grades.criterion_tags,
        ),
        "length_score_correlation": scoring.length_score_correlation(grades.response_length, overall),
        "counts": {
            "grades": int(grades.grade_met.size),
            "graded": int(grades.grade_met.size) - n_failed,
            "failed": n_failed,
            "missing": missing,
            "examples": scores["n_responses"],
            "examples_scored": scores["n_scored"],
            "examples_left_out": scores["n_responses"] - scores["n_scored"],
            "examples_incomplete": scores["n_incomplete"],
            "examples_unscorable": scores["n_unscorable"],
            "refusals": grades.n_refused,
            "truncated": grades.n_truncated,
        },
        "reused": grades.n_reused,
        "length_adjustment": adjustment,
    }


def run_report(*, run: Run, seed: int | None = DEFAULT_SEED) -> RunReport:
    """Compute the report of `run` from the database. `seed` fixes the bootstrap resamples."""
    grades = run_grades_get(run=run)
    scores = scoring.score_grades(**grades.score_arrays())
    overall = scores["metrics"][scoring.OVERALL]
    status = np.where(scores["scored"], 0, np.where(_incomplete(grades), 1, 2)).astype(np.uint8)
    # NaN (left out) sorts last; ties keep response order, which is file order for an imported run.
    order = np.argsort(overall, kind="stable")
    data = _report_data(grades, scores, seed, length_adjustment(run), run.bootstrap)
    data["bootstrap"] = {"method": run.bootstrap, "description": BOOTSTRAP_LABELS[run.bootstrap]}
    data["grader"] = grader_mark(run)
    return RunReport(
        data=data,
        ranked_response_ids=grades.response_ids[order],
        ranked_scores=overall[order],
        ranked_status_codes=status[order],
        version=run.report_version,
    )


def grading_record(run: Run) -> dict | None:
    """How the run asked its grader: its mode and, per response, the explanation length, the
    criteria per call, the prompt's sha256 and the fallbacks (criteria graded per criterion
    because their entry was unusable). None for an imported run. Kept beside the scores,
    not in them: two runs whose verdicts agree have equal reports whatever their modes."""
    config = run.grader_config
    if config is None:
        return None
    record: dict = {"mode": config.grading_mode, "prompt_sha256": config.prompt_hash}
    if config.grading_mode == GradingMode.PER_RESPONSE:
        record |= {
            "explanation_length": config.explanation_length,
            "criteria_per_call": config.criteria_per_call,
            "response_prompt_sha256": config.response_prompt_hash,
            "fallbacks": Grade.objects.filter(run=run, mode=GradingMode.PER_CRITERION).count(),
        }
    return record


def responses_record(run: Run) -> dict:
    """Whose responses the run graded: ``origin`` is "physician" (the physicians' responses of
    HealthBench Professional rows), "sampled" (from a policy endpoint), "run" (another run's),
    "labelled" (the physician-labelled items) or "stored" (an imported or recorded run's);
    ``model`` is the run's model name ("physician" for the physicians'). Read from the run, not
    its grades: kept beside the scores, like grading_record."""
    if run.physician_responses:
        origin = "physician"
    elif run.policy_config_id is not None:
        origin = "sampled"
    elif run.responses_from_id is not None:
        origin = "run"
    elif run.plan == Run.Plan.LABELLED:
        origin = "labelled"
    else:
        origin = "stored"
    return {"origin": origin, "model": run.policy_model}


def run_report_document(*, run: Run, seed: int | None = DEFAULT_SEED) -> dict:
    """What the downloads, the API and `run_report` send: the report, how it was graded and
    whose responses it graded."""
    return {
        **run_report_data_cached(run=run, seed=seed),
        "grading": grading_record(run),
        "responses": responses_record(run),
    }


def _incomplete(grades: RunGrades) -> npt.NDArray[np.bool_]:
    n = grades.response_ids.size
    incomplete = np.bincount(grades.grade_response[grades.grade_met == scoring.MISSING], minlength=n) > 0
    if grades.expected_grades is not None:
        incomplete |= np.bincount(grades.grade_response, minlength=n) < grades.expected_grades
    return incomplete


def report_cache_key(*, run: Run, seed: int) -> str:
    """The cache key of a run's report, without its version (see healthbench_web.shared_cache).

    The length-adjustment constants and the bootstrap are part of it: they belong to the run's
    settings, not to its progress."""
    options = length_adjustment(run)
    adjusted = "" if options is None else f"{options['centre']}:{options['penalty_per_500']!r}"
    return f"{REPORT_VERSION}:{run.code}:{seed}:{adjusted}:{run.bootstrap}"


def run_report_data_cached(*, run: Run, seed: int | None = DEFAULT_SEED) -> dict:
    """The report's JSON document alone (what the downloads and the API send), cached beside the
    whole report: a few kilobytes to read back instead of the ranking's megabytes."""
    if seed is None:
        return run_report(run=run, seed=None).data
    return once_per_version(
        report_cache_key(run=run, seed=seed).replace("run-report:", "run-report-data:", 1),
        run.report_version,
        lambda: run_report_cached(run=run, seed=seed).data,
        stale_ok=run.is_active,
    )


def run_report_cached(*, run: Run, seed: int | None = DEFAULT_SEED) -> RunReport:
    """run_report, computed once per progress step of the run (Run.report_version) and shared
    by every process through the cache; no query beyond the run's own row, which the caller has.

    While the run is active, a request that finds another process computing the new step gets
    the previous step's report at once rather than waiting. The key holds the run's code, not
    its id: ids come back after a rollback on SQLite."""
    if seed is None:
        return run_report(run=run, seed=None)
    return once_per_version(
        report_cache_key(run=run, seed=seed),
        run.report_version,
        lambda: run_report_stored(run=run, seed=seed),
        stale_ok=run.is_active,
    )


def run_report_stored(*, run: Run, seed: int) -> RunReport:
    """run_report of a finished run as the database keeps it (grading.reports.stored): computed
    once, then read back by any process after the cache forgot it."""

    def encode(report: RunReport) -> bytes:
        return stored.encode_arrays(report.data, {name: getattr(report, name) for name in stored.RANKING})

    def decode(payload: bytes) -> RunReport:
        data, arrays = stored.decode_arrays(payload)
        return RunReport(data=data, version=run.report_version, **arrays)

    key = report_cache_key(run=run, seed=seed)
    return stored.stored(run, StoredReport.Kind.REPORT, key, lambda: run_report(run=run, seed=seed), encode, decode)


# --- presentation shared by the CSV and the page ----------------------------------------


def metric_rows(data: dict, prefix: str | None = None) -> list[dict]:
    """One row per metric (name, value, n_samples, bootstrap_std), sorted by name.

    With `prefix`, only the metrics whose name starts with it; without, ``score`` first and
    then every metric."""
    metrics = data["metrics"]
    names = sorted(
        name
        for name in metrics
        if not name.endswith((":n_samples", ":bootstrap_std")) and (prefix is None or name.startswith(prefix))
    )
    if prefix is None and data["score"] is not None:
        names.insert(0, "score")
    return [
        {
            "name": name,
            "value": data["score"] if name == "score" else metrics[name],
            "n_samples": metrics[f"{name}:n_samples"],
            "bootstrap_std": metrics[f"{name}:bootstrap_std"],
        }
        for name in names
    ]


def report_csv(data: dict) -> str:
    """The metrics as CSV: a header, then one row per metric (see metric_rows)."""
    rows = [[row[c] for c in CSV_COLUMNS] for row in metric_rows(data)]
    # The length adjustment's constants travel with the numbers they produced, and so does the mode.
    for key, value in (data.get("length_adjustment") or {}).items():
        rows.append([f"length_adjustment:{key}", value, "", ""])
    if data.get("bootstrap"):
        rows.append(["bootstrap:method", data["bootstrap"]["method"], "", ""])
    # So does the grader's standing against the reference's.
    grader = data.get("grader")
    if grader:
        rows.append(["grader:request", grader["label"], "", ""])
        rows.append(["grader:prompt", grader["prompt_label"], "", ""])
        rows.append(["grader:prompt_sha256", grader["prompt_sha256"], "", ""])
        if "answers" in grader:
            rows.append(["grader:answers", grader["answers"], "", ""])
    for key, value in (data.get("grading") or {}).items():
        rows.append([f"grading:{key}", value, "", ""])
    for key, value in (data.get("responses") or {}).items():
        rows.append([f"responses:{key}", value, "", ""])
    if data.get("calibration"):
        rows.extend(calibration_csv_rows(data["calibration"]))
    return csv_text(CSV_COLUMNS, rows)


def calibration_csv_rows(data: dict) -> list[list]:
    """The overall calibration as rows of the report CSV (name, value, n_samples, bootstrap_std)."""
    overall = data["overall"]
    interval = overall["interval"] or {}
    rows = [
        ["calibration:estimate", overall["estimate"], overall["n"], ""],
        ["calibration:interval_low", interval.get("low", ""), "", ""],
        ["calibration:interval_high", interval.get("high", ""), "", ""],
        ["calibration:grader_only", overall["grader_only"], overall["n_run"], ""],
        ["calibration:physician_only", overall["physician_only"], overall["n"], ""],
        ["calibration:bias", overall["bias"], overall["n"], ""],
        ["calibration:effective_n", overall["effective_n"], "", ""],
        ["calibration:sample_seed", data["design"]["seed"], data["design"]["size"], ""],
    ]
    return [[name, "" if value is None else value, n, std] for name, value, n, std in rows]
