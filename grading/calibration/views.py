"""A run's calibration: the page with the calibrated score, drawing the sample (preview, then
confirm), and the JSON and CSV downloads."""

import json
import secrets

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotation.access import physician_for
from grading.access import get_run_for_reader
from grading.calibration.report import calibration_csv, calibration_report_cached
from grading.calibration.sample import (
    FINISHED,
    MAX_SIZE,
    MIN_SIZE,
    SampleError,
    calibration_sample_draw,
    calibration_sample_preview,
)
from grading.models import Run


class SampleForm(forms.Form):
    size = forms.IntegerField(
        label="Responses to sample",
        min_value=MIN_SIZE,
        max_value=MAX_SIZE,
        initial=150,
        help_text="50–300 is typical; from 30 on the report shows an interval.",
    )
    seed = forms.IntegerField(
        label="Seed",
        min_value=0,
        max_value=2**63 - 1,
        help_text="Kept with the sample: the same seed draws the same responses.",
    )
    by_theme = forms.BooleanField(
        label="Stratify by theme", required=False, help_text="Each theme in proportion to its share of the run."
    )
    physicians = forms.TypedChoiceField(
        label="Physicians per response", choices=((1, "1"), (2, "2")), coerce=int, initial=1
    )


def _context(run: Run) -> dict:
    data = calibration_report_cached(run)
    return {
        "run": run,
        "data": data,
        "can_draw": data is None and run.status in FINISHED,
    }


@require_GET
@login_required
def calibration_detail(request: HttpRequest, code) -> HttpResponse:
    run = get_run_for_reader(request, code)
    context = _context(run)
    if context["can_draw"]:
        context["form"] = SampleForm(initial={"seed": secrets.randbelow(2**31)})
    return render(request, "calibration/detail.html", context)


@require_http_methods(["POST"])
@login_required
def calibration_draw(request: HttpRequest, code) -> HttpResponse:
    """First POST: the preview (nothing written); the POST with `confirm`: the draw."""
    run = get_run_for_reader(request, code)
    context = _context(run)
    form = SampleForm(request.POST)
    if not form.is_valid():
        return render(request, "calibration/detail.html", {**context, "form": form}, status=400)
    options = {
        "run": run,
        "size": form.cleaned_data["size"],
        "seed": form.cleaned_data["seed"],
        "by_theme": form.cleaned_data["by_theme"],
        "physicians_per_response": form.cleaned_data["physicians"],
    }
    try:
        if "confirm" not in request.POST:
            preview = calibration_sample_preview(**options)
            return render(request, "calibration/detail.html", {**context, "form": form, "preview": preview})
        summary = calibration_sample_draw(
            **options, created_by=request.user.get_username(), assigned_by=physician_for(request.user)
        )
    except SampleError as exc:
        form.add_error(None, str(exc))
        return render(request, "calibration/detail.html", {**context, "form": form}, status=400)
    messages.success(request, str(summary).capitalize())
    return redirect("calibration_detail", code=run.code)


def _download(run: Run, text: str, extension: str, content_type: str) -> HttpResponse:
    response = HttpResponse(text, content_type=content_type)
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in run.name).strip("-") or "run"
    response["Content-Disposition"] = f'attachment; filename="{name}-calibration.{extension}"'
    return response


def _report_or_none(request: HttpRequest, code) -> tuple[Run, dict | None]:
    run = get_run_for_reader(request, code)
    return run, calibration_report_cached(run)


@require_GET
@login_required
def calibration_json(request: HttpRequest, code) -> HttpResponse:
    run, data = _report_or_none(request, code)
    if data is None:
        return render(request, "calibration/detail.html", _context(run), status=404)
    return _download(run, json.dumps(data, indent=2) + "\n", "json", "application/json")


@require_GET
@login_required
def calibration_csv_download(request: HttpRequest, code) -> HttpResponse:
    run, data = _report_or_none(request, code)
    if data is None:
        return render(request, "calibration/detail.html", _context(run), status=404)
    return _download(run, calibration_csv(data), "csv", "text/csv; charset=utf-8")
