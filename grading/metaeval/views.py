"""Meta-evaluation pages: runs with physician labels to compare, the report, the disagreements.

Open to researchers and curators only. Views stay thin: grading.metaeval.report builds what
they show, and the downloads write the very document the `meta_eval` command prints.
"""

import uuid
from typing import cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_GET, require_POST
from django_htmx.middleware import HtmxDetails

from annotation.access import require_role
from grading.access import READERS, get_run_for_reader
from grading.metaeval.charts import COLOURS
from grading.metaeval.compare import ComparisonError, graders_compare
from grading.metaeval.report import (
    DEFAULT_SEED,
    disagreement_page,
    report_csv,
    report_json,
    report_page,
    run_meta_eval_analysis_cached,
    run_meta_eval_report_cached,
)
from grading.metaeval.selectors import labels_exist, runs_with_meta_eval
from grading.models import Endpoint, ExplanationLength, GraderTemplate, GradingMode, Run
from grading.pipeline.modes import MODES, mode_of
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest, RunSpecError, run_request
from grading.pipeline.runs import QueueUnavailable

MAX_RUNS = len(COLOURS)


class _Request(HttpRequest):
    htmx: HtmxDetails


def _runs_for_reader(request: HttpRequest, codes: list[str]) -> list[Run]:
    """The runs named by `?run=<code>`, in the order asked: 403 for other roles, 404 for unknown codes."""
    require_role(request, *READERS)
    try:
        # A malformed code must be a 404: the ORM would raise ValidationError (a 500) on it.
        parsed = list(dict.fromkeys(uuid.UUID(code) for code in codes if code))
    except ValueError:
        raise Http404("No such run.") from None
    if not parsed:
        raise Http404("Choose a run.")
    if len(parsed) > MAX_RUNS:
        raise BadRequest(gettext("Compare at most %(max)s runs at once.") % {"max": MAX_RUNS})
    return [get_run_for_reader(request, code) for code in parsed]


def _seed(request: HttpRequest) -> int:
    try:
        seed = int(request.GET.get("seed", DEFAULT_SEED))
    except ValueError:
        seed = -1
    if seed < 0:
        # numpy refuses negative seeds; say so instead of failing with a 500.
        raise BadRequest("seed must be a whole number from 0 up")
    return seed


@require_GET
@login_required
def metaeval_runs(request: HttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    runs = runs_with_meta_eval()
    context = {
        "runs": runs,
        "max_runs": MAX_RUNS,
        "launch": GraderComparisonLaunchForm(sources=[run for run, _ in runs]),
        "labels_exist": bool(runs) or labels_exist(),
    }
    return render(request, "metaeval/runs.html", context)


@require_GET
@login_required
def metaeval_report(request: HttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    ticked = [code for code in request.GET.getlist("run") if code]
    # "Compare the ticked runs" with too few or too many ticked: back to the list, saying so.
    if not ticked:
        messages.warning(request, gettext("Tick at least one run to compare, then press the button again."))
        return redirect("metaeval_runs")
    if len(set(ticked)) > MAX_RUNS:
        messages.warning(
            request,
            gettext("Tick at most %(max)s runs: the report compares that many side by side.") % {"max": MAX_RUNS},
        )
        return redirect("metaeval_runs")
    runs = _runs_for_reader(request, ticked)
    analyses = [run_meta_eval_analysis_cached(run=run, seed=_seed(request)) for run in runs]
    return render(request, "metaeval/report.html", report_page(analyses))


@require_GET
@login_required
def metaeval_disagreements(request: _Request) -> HttpResponse:
    (run,) = _runs_for_reader(request, [request.GET.get("run", "")])
    context = disagreement_page(
        run=run,
        category=request.GET.get("category", ""),
        show=request.GET.get("show", ""),
        page_number=request.GET.get("page"),
    )
    context["run"] = run
    # htmx swaps just the list when the reader pages through it.
    template = "metaeval/disagreements.html#items" if request.htmx else "metaeval/disagreements.html"
    return render(request, template, context)


@require_GET
@login_required
def metaeval_download(request: HttpRequest, fmt: str) -> HttpResponse:
    (run,) = _runs_for_reader(request, [request.GET.get("run", "")])
    document = run_meta_eval_report_cached(run=run, seed=_seed(request))
    if fmt == "json":
        response = HttpResponse(report_json(document), content_type="application/json")
    else:
        response = HttpResponse(report_csv(document), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="meta-eval-{slugify(run.name) or run.code}.{fmt}"'
    return response


class GraderComparisonLaunchForm(forms.Form):
    """Grade the physician-labelled items (all of them, or those a run graded) once per chosen
    mode, with one grader."""

    source = forms.ModelChoiceField(
        Run.objects.order_by("-created"),
        to_field_name="code",
        required=False,
        empty_label="All the physician-labelled items",
        label="Items",
        help_text="Every labelled item of the imported meta-eval files, or the labelled items a run graded",
    )
    grader = forms.ModelChoiceField(Endpoint.objects.order_by("name"), to_field_name="name", label="Grader endpoint")
    modes = forms.MultipleChoiceField(
        choices=GradingMode.choices,
        initial=list(MODES),
        widget=forms.CheckboxSelectMultiple,
        label="Grading modes",
    )
    explanation_length = forms.ChoiceField(
        choices=ExplanationLength.choices, initial=ExplanationLength.SENTENCE, label="Per-response explanation"
    )
    stored_template = forms.ModelChoiceField(
        GraderTemplate.objects.order_by("name"),
        to_field_name="name",
        required=False,
        empty_label="Ours",
        label="Grader template",
        help_text="A template stored with grader_template import (per response: for the criteria asked alone).",
    )

    def __init__(self, *args, sources: list[Run], **kwargs):
        super().__init__(*args, **kwargs)
        # Only runs whose items physicians labelled: the others have nothing to compare.
        field = cast("forms.ModelChoiceField", self.fields["source"])
        field.queryset = Run.objects.filter(id__in=[run.id for run in sources]).order_by("-created")

    def launch_requests(self, stamp: str) -> list[RunRequest]:
        """One run per chosen mode, named after the items, the grader, the mode and `stamp`."""
        data = self.cleaned_data
        source, grader = data["source"], data["grader"]
        items = source.name if source is not None else "physician-labelled items"
        return [
            run_request(
                name=f"{items[:120]} · {grader.name[:40]} {mode} {stamp}",
                grader=grader,
                stored_template=data.get("stored_template"),
                responses_from=source,
                labelled=source is None,
                grading_mode=mode,
                explanation_length=data["explanation_length"] if mode_of(mode).takes_explanation else "",
            )
            for mode in data["modes"]
        ]


@require_GET
@login_required
def graders_comparison(request: HttpRequest) -> HttpResponse:
    runs = _runs_for_reader(request, request.GET.getlist("run"))
    context: dict = {"runs": runs}
    if len(runs) < 2:
        messages.warning(request, gettext("Tick two or more runs to compare their graders."))
        return redirect("metaeval_runs")
    try:
        comparison = graders_compare(runs=runs, seed=_seed(request))
    except ComparisonError as exc:
        context["problem"] = str(exc)
    else:
        context["comparison"] = comparison
        context["rows"] = [
            {
                "category": category,
                "cells": [
                    {
                        "f1": run["macro_f1"][category],
                        "difference": (run.get("f1_difference_vs_first") or {}).get(category),
                    }
                    for run in comparison["runs"]
                ],
            }
            for category in comparison["categories"]
        ]
    return render(request, "metaeval/graders.html", context)


@require_POST
@login_required
def graders_comparison_launch(request: HttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    form = GraderComparisonLaunchForm(request.POST, sources=[run for run, _ in runs_with_meta_eval()])
    if not form.is_valid():
        for field, errors in form.errors.items():
            for error in errors:
                messages.error(request, f"{form[field].label if field in form.fields else ''}: {error}".lstrip(": "))
        return redirect("metaeval_runs")
    source = form.cleaned_data["source"]
    items = gettext("physician-labelled items")
    if source is not None:
        items = gettext("items of %(name)s") % {"name": source.name}
    launched = []
    try:
        for spec in form.launch_requests(timezone.now().strftime("%Y%m%d-%H%M%S")):
            launched.append(run_launch(spec=spec))
    except (RunSpecError, QueueUnavailable) as exc:
        messages.error(request, str(exc))
        if not launched:
            return redirect("metaeval_runs")
    messages.success(
        request,
        ngettext(
            "Launched %(n)s run on the %(items)s; figures fill in as they grade.",
            "Launched %(n)s runs on the %(items)s; figures fill in as they grade.",
            len(launched),
        )
        % {"n": len(launched), "items": items},
    )
    compared = [run for run in [source, *launched] if run is not None]
    query = "&".join(f"run={run.code}" for run in compared)
    # One run alone has nobody to be compared with: its own meta-eval report then.
    return redirect(f"{reverse('graders_comparison' if len(compared) > 1 else 'metaeval_report')}?{query}")
