"""Score reports for researchers and curators: runs, a run's report, downloads, transcripts."""

import json
import math
import re

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models.functions import Length
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django_htmx.middleware import HtmxDetails

from annotation.access import require_role
from grading.access import READERS, get_run_for_reader, get_run_response_for_reader
from grading.calibration.report import calibration_report_cached, with_calibration
from grading.drift import rubric_drift_stored
from grading.models import Grade, Response, Run
from grading.pipeline.progress import run_progress
from grading.plans import planned_count
from grading.reports import scoring
from grading.reports.report import metric_rows, report_csv, run_report_cached, run_report_document
from grading.reports.results_file import dump_results
from grading.reports.run_export import run_export

EXAMPLES_PER_PAGE = 50
RUNS_PER_PAGE = 50

# The example tags a HealthBench Professional row's labels become (annotation.formats.professional).
PROFESSIONAL_GROUPS = (
    ("use_case:", "Use case"),
    ("type:", "Type"),
    ("difficulty:", "Difficulty"),
    ("specialty:", "Specialty"),
)


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


@require_GET
@login_required
def report_list(request: HtmxHttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    runs = Run.objects.select_related("grader_config").order_by("-created", "-id")
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "reports/report_list.html", {"page": page})


@require_GET
@login_required
def report_detail(request: HtmxHttpRequest, code) -> HttpResponse:
    run = get_run_for_reader(request, code)
    report = run_report_cached(run=run)
    # Page through positions of the ranking; only the page's responses are read from the database.
    page = Paginator(range(report.ranked_response_ids.size), EXAMPLES_PER_PAGE).get_page(request.GET.get("page"))
    adjustment = report.data.get("length_adjustment")
    context = {
        "run": run,
        "page": page,
        "examples": _examples(report, page, adjustment),
        "adjustment": adjustment,
        "report_version": report.version,
    }
    if request.htmx:
        return render(request, "reports/report_detail.html#examples", context)
    data = report.data
    context.update(
        data=data,
        overall=metric_rows(data, scoring.OVERALL)[:1],
        overall_adjusted=metric_rows(data, scoring.OVERALL + scoring.LENGTH_ADJUSTED),
        themes=metric_rows(data, "theme:"),
        axes=metric_rows(data, "axis:"),
        # A HealthBench Professional run's labels, each in its own table like themes.
        label_groups=[
            (heading, rows) for prefix, heading in PROFESSIONAL_GROUPS if (rows := metric_rows(data, prefix))
        ],
        other_tags=[
            row
            for row in metric_rows(data)
            if not row["name"].startswith(
                ("score", scoring.OVERALL, "theme:", "axis:", "cluster:", *(p for p, _ in PROFESSIONAL_GROUPS))
            )
        ],
        consensus=_consensus_rows(data),
        worst=_worst_at_k_chart(data["worst_at_k"]),
        # The actual cost from the stored usage (not cached with the report: a run in
        # progress keeps spending).
        progress=run_progress(run=run) if run.grader_config_id else None,
        drift=None if run.is_active else rubric_drift_stored(run),
        calibration=None if run.is_active else calibration_report_cached(run),
    )
    return render(request, "reports/report_detail.html", context)


def _examples(report, page, adjustment: dict | None) -> list[dict]:
    positions = slice(page.start_index() - 1, page.end_index()) if page.paginator.count else slice(0, 0)
    ids = report.ranked_response_ids[positions].tolist()
    responses = (
        Response.objects.filter(id__in=ids)
        .select_related("conversation")
        .only(
            "id",
            "code",
            "sample_index",
            "refused",
            "truncated",
            "output_limit",
            "conversation__prompt_id",
            "conversation__theme",
        )
        .annotate(length=Length("text"))
        .in_bulk()
    )
    scores = report.ranked_scores[positions].tolist()
    statuses = report.ranked_status(positions)
    first = page.start_index()
    rows = [
        {"rank": first + i, "response": responses[pk], "score": None if math.isnan(s) else s, "status": status}
        for i, (pk, s, status) in enumerate(zip(ids, scores, statuses, strict=True))
    ]
    if adjustment is not None:
        for row in rows:
            row["adjusted"] = (
                None
                if row["score"] is None
                else float(
                    scoring.length_adjusted(
                        row["score"],
                        row["response"].length,
                        centre=adjustment["centre"],
                        penalty=adjustment["penalty_per_500"],
                    )
                )
            )
    return rows


def _consensus_rows(data: dict) -> list[dict]:
    metrics = data["metrics"]
    return [
        {"name": name, **rates, "score": metrics.get(name), "n_samples": metrics.get(f"{name}:n_samples")}
        for name, rates in sorted(data["consensus_error_rates"].items())
    ]


def _worst_at_k_chart(worst: dict[str, float]) -> dict | None:
    """Geometry of the worst-at-k line chart, drawn as inline SVG by the template."""
    if not worst:
        return None
    width, height, left, right, top, bottom = 560, 220, 44, 16, 12, 32
    ks = sorted(int(k) for k in worst)
    span = max(ks[-1] - 1, 1)

    def x(k: int) -> float:
        return round(left + (k - 1) / span * (width - left - right), 1)

    def y(value: float) -> float:
        return round(top + (1 - value) * (height - top - bottom), 1)

    step = max(1, -(-len(ks) // 16))  # at most ~16 labels on the k axis
    points = [{"k": k, "value": worst[str(k)], "x": x(k), "y": y(worst[str(k)])} for k in ks]
    return {
        "width": width,
        "height": height,
        "left": left,
        "plot_right": width - right,
        "plot_bottom": height - bottom,
        "points": points,
        "line": " ".join(f"{p['x']},{p['y']}" for p in points),
        "y_ticks": [{"label": f"{v:.2f}", "y": y(v)} for v in (0, 0.25, 0.5, 0.75, 1)],
        "x_ticks": [{"label": k, "x": x(k)} for k in ks[::step]],
        "label_y": height - 4,
    }


def _download_name(run: Run, extension: str) -> str:
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '-', run.name).strip('-') or 'run'}-report.{extension}"


@require_GET
@login_required
def report_json(request: HtmxHttpRequest, code) -> HttpResponse:
    run = get_run_for_reader(request, code)
    text = json.dumps(with_calibration(run, run_report_document(run=run)), indent=2) + "\n"
    response = HttpResponse(text, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{_download_name(run, "json")}"'
    return response


@require_GET
@login_required
def report_csv_download(request: HtmxHttpRequest, code) -> HttpResponse:
    run = get_run_for_reader(request, code)
    response = HttpResponse(
        report_csv(with_calibration(run, run_report_document(run=run))), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{_download_name(run, "csv")}"'
    return response


@require_GET
@login_required
def report_results_download(request: HtmxHttpRequest, code) -> HttpResponse:
    """The run as a simple-evals results file, as `export_run` writes it."""
    run = get_run_for_reader(request, code)
    text = dump_results(run_export(run=run).document)
    response = HttpResponse(text, content_type="application/json")
    name = _download_name(run, "json").removesuffix("-report.json")
    response["Content-Disposition"] = f'attachment; filename="{name}_allresults.json"'
    return response


@require_GET
@login_required
def report_transcript(request: HtmxHttpRequest, code, response_code) -> HttpResponse:
    run = get_run_for_reader(request, code)
    response = get_run_response_for_reader(request, run, response_code)
    grades = list(
        Grade.objects.filter(run=run, response=response)
        .only("position", "criterion_text", "points", "tags", "status", "met", "explanation", "error")
        .order_by("position")
    )
    failed = sum(g.status == Grade.Status.FAILED for g in grades)
    planned = planned_count(run, response.id, response.conversation_id)
    missing = 0 if planned is None else max(0, planned - len(grades))
    # The score as the report computes it, unless a grade failed or is missing (then the
    # report leaves it out): both read the run's plan, never the live rubric.
    score = (
        None if failed or missing else scoring.example_score([g.points for g in grades], [bool(g.met) for g in grades])
    )
    context = {
        "run": run,
        "response": response,
        "conversation": response.conversation,
        "grades": grades,
        "failed": failed,
        "missing": missing,
        "score": score,
    }
    return render(request, "reports/report_transcript.html", context)
