"""Researcher page: compare two runs."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from annotation.access import require_role
from grading.access import READERS, get_run_for_reader
from grading.calibration.report import calibration_report_cached
from grading.models import Run
from grading.reports.compare import run_comparison
from grading.reports.grader_marks import grader_warnings
from grading.reports.ideal_comparison import ideal_comparison


def _chosen(request: HttpRequest) -> tuple[Run | None, Run | None]:
    a, b = request.GET.get("a"), request.GET.get("b")
    return (get_run_for_reader(request, a) if a else None, get_run_for_reader(request, b) if b else None)


@login_required
def run_compare(request: HttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    run_a, run_b = _chosen(request)
    comparison = run_comparison(run_a=run_a, run_b=run_b) if run_a and run_b else None
    runs = Run.objects.filter(status__in=[Run.Status.DONE, Run.Status.IMPORTED, Run.Status.RUNNING]).order_by("name")
    context = {
        "runs": runs,
        "run_a": run_a,
        "run_b": run_b,
        "comparison": comparison,
        "grader_warnings": grader_warnings(run_a, run_b) if run_a and run_b else [],
        # Each run's grader-only score beside what physicians would give it, where sampled.
        "calibrations": [(run, calibration_report_cached(run)) for run in (run_a, run_b) if run] if comparison else [],
    }
    return render(request, "compare/compare.html", context)


@login_required
def run_compare_json(request: HttpRequest) -> JsonResponse:
    require_role(request, *READERS)
    run_a, run_b = _chosen(request)
    if not (run_a and run_b):
        return JsonResponse({"error": "give two runs as ?a=<code>&b=<code>"}, status=400)
    return JsonResponse(run_comparison(run_a=run_a, run_b=run_b) | {"grader_warnings": grader_warnings(run_a, run_b)})


@login_required
def ideal_vs_reference(request: HttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    chosen = [get_run_for_reader(request, code) for code in request.GET.getlist("run") if code]
    comparison = ideal_comparison(runs=chosen) if chosen else None
    runs = Run.objects.filter(status__in=[Run.Status.DONE, Run.Status.IMPORTED]).order_by("name")
    return render(request, "compare/ideal.html", {"runs": runs, "chosen": chosen, "comparison": comparison})
