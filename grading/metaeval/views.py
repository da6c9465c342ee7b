"""Meta-evaluation pages: runs with physician labels to compare, the report, the disagreements.

Open to researchers and curators only. Views stay thin: grading.metaeval.report builds what
they show, and the downloads write the very document the `meta_eval` command prints.
"""

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_GET
from django_htmx.middleware import HtmxDetails

from annotation.access import require_role
from grading.access import READERS, get_run_for_reader
from grading.metaeval.charts import COLOURS
from grading.metaeval.report import (
    DEFAULT_SEED,
    disagreement_page,
    report_csv,
    report_json,
    report_page,
    run_meta_eval_analysis_cached,
    run_meta_eval_report_cached,
)
from grading.metaeval.selectors import runs_with_meta_eval
from grading.models import Run

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
        raise BadRequest(f"Compare at most {MAX_RUNS} runs at once.")
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
    return render(request, "metaeval/runs.html", {"runs": runs_with_meta_eval(), "max_runs": MAX_RUNS})


@require_GET
@login_required
def metaeval_report(request: HttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    ticked = [code for code in request.GET.getlist("run") if code]
    # "Compare the ticked runs" with too few or too many ticked: back to the list, saying so.
    if not ticked:
        messages.warning(request, "Tick at least one run to compare, then press the button again.")
        return redirect("metaeval_runs")
    if len(set(ticked)) > MAX_RUNS:
        messages.warning(request, f"Tick at most {MAX_RUNS} runs: the report compares that many side by side.")
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
