"""Grading runs in the browser: launch one (estimate first), watch it, cancel it.

Researchers and curators only; physicians never see grader output. The run page polls its
progress fragment every two seconds with htmx while the run is active.
"""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.html import escape
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from annotation.access import require_role
from annotation.models import Subset
from grading.access import READERS, get_run_for_reader
from grading.endpoint_rules import RAW_FIELDS_MESSAGE, endpoint_problems, raw_endpoint_fields
from grading.models import Endpoint, ExplanationLength, GraderTemplate, GradingMode, Run
from grading.pipeline.estimate import MAX_CONCURRENCY, plan_estimate, run_plan, spec_check
from grading.pipeline.grader_prompt import TemplateError, check_template
from grading.pipeline.modes import DEFAULT, mode_of
from grading.pipeline.progress import run_progress, ungradable_conversations
from grading.pipeline.response_prompt import CRITERIA_PER_CALL
from grading.pipeline.resume_estimate import resume_estimate
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import DEFAULT_CONCURRENCY, RunRequest, RunSpecError, run_request, template_text
from grading.pipeline.runs import QueueUnavailable, resume_check, run_cancel, run_resume
from grading.reports.grader_marks import grader_mark
from healthbench_web.throttles import launch_refusal

RUNS_PER_PAGE = 50


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


class RunForm(forms.Form):
    """The same choices as `manage.py grade`. Endpoints are chosen by name: their URLs, keys
    and request settings belong to curators."""

    SOURCES = [
        ("responses", "The responses of an existing run"),
        ("sample", "New samples from a policy endpoint"),
        ("physician", "The physicians' responses (HealthBench Professional rows)"),
    ]

    name = forms.CharField(max_length=200)
    source = forms.ChoiceField(choices=SOURCES, initial="responses", widget=forms.RadioSelect)
    responses_from = forms.ModelChoiceField(
        Run.objects.order_by("-created"), to_field_name="code", required=False, label="Responses of run"
    )
    subset = forms.ModelChoiceField(Subset.objects.order_by("name"), to_field_name="code", required=False)
    policy = forms.ModelChoiceField(
        Endpoint.objects.order_by("name"), to_field_name="name", required=False, label="Policy endpoint"
    )
    rubric_changes = forms.BooleanField(
        required=False,
        label="Only the criteria added or edited since that run",
        help_text="Grades its responses on the live rubric's changes alone (its report names them)",
    )
    samples = forms.IntegerField(min_value=1, max_value=100, initial=1, label="Samples per conversation")

    grader = forms.ModelChoiceField(
        Endpoint.objects.order_by("name"),
        to_field_name="name",
        label="Grader endpoint",
        help_text="Endpoints are set up by curators (model, URL, key, prices, limits).",
    )
    grader_template = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        required=False,
        # Form help text is not escaped: the placeholders would read as HTML tags.
        help_text=escape("Empty for ours; otherwise a template with <<conversation>> and <<rubric_item>>"),
    )
    stored_template = forms.ModelChoiceField(
        GraderTemplate.objects.order_by("name"),
        to_field_name="name",
        required=False,
        label="Stored grader template",
        help_text="Instead of the text above: a template stored with grader_template import (the reference's "
        "is read from your own copy of simple-evals).",
    )
    grading_mode = forms.ChoiceField(
        choices=GradingMode.choices,
        initial=DEFAULT,
        widget=forms.RadioSelect,
        required=False,
        help_text=f"Per response: up to {CRITERIA_PER_CALL} criteria a call, far fewer calls and tokens; "
        "compare its agreement with physicians before trusting it.",
    )
    explanation_length = forms.ChoiceField(
        choices=ExplanationLength.choices,
        initial=ExplanationLength.SENTENCE,
        required=False,
        label="Explanation per criterion",
        help_text="Per response only: shorter explanations cost less output.",
    )
    concurrency = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, initial=DEFAULT_CONCURRENCY)
    use_cache = forms.BooleanField(required=False, initial=True, label="Reuse grades of identical earlier requests")
    length_adjusted = forms.BooleanField(
        required=False,
        label="Report length-adjusted scores",
        help_text="HealthBench Professional's adjustment: 0.0147 off per 500 characters beyond 2,000",
    )
    healthbench_professional = forms.BooleanField(
        required=False, label="HealthBench Professional run", help_text="Scores with the length adjustment"
    )
    batch = forms.BooleanField(
        required=False,
        label="Grade through the provider's Batch API",
        help_text="At the endpoint's batch discount; the provider answers within 24 hours",
    )

    GROUPS = [
        ("What to grade", ["name", "source", "responses_from", "rubric_changes", "subset", "policy", "samples"]),
        ("Grader", ["grader", "grader_template", "stored_template", "grading_mode", "explanation_length"]),
        ("Run", ["concurrency", "use_cache", "batch", "length_adjusted", "healthbench_professional"]),
    ]

    # Fields that apply to some sources only (space-separated): the page hides them while
    # another source is chosen.
    SOURCE_ONLY = {
        "responses_from": "responses",
        "rubric_changes": "responses",
        "subset": "sample physician",
        **dict.fromkeys(["policy", "samples"], "sample"),
    }

    def groups(self) -> list[tuple[str, list[tuple[forms.BoundField, str]]]]:
        """Per fieldset, each field with the source it belongs to ('' for all)."""
        return [
            (legend, [(self[name], self.SOURCE_ONLY.get(name, "")) for name in names]) for legend, names in self.GROUPS
        ]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if Run.objects.filter(name=name).exists():
            raise forms.ValidationError(
                gettext("A run named %(name)s already exists; choose another name.") % {"name": repr(name)}
            )
        return name

    def clean_grader_template(self) -> str:
        template = self.cleaned_data["grader_template"]
        if template:
            try:
                check_template(template_text(template))
            except TemplateError as exc:
                raise forms.ValidationError(str(exc)) from None
        return template

    def clean(self) -> dict:
        data = super().clean() or {}
        if raw_endpoint_fields(self.data):
            self.add_error(None, RAW_FIELDS_MESSAGE)
        # Every check that its own fields allow runs on the first submit, each beside its field.
        if data.get("source") == "sample":
            for field, problem in (
                ("policy", "Sampling needs a policy endpoint."),
                ("subset", "Sampling needs a subset."),
            ):
                if not data.get(field) and field not in self.errors:
                    self.add_error(field, problem)
        elif (
            data.get("source") == "responses" and not data.get("responses_from") and "responses_from" not in self.errors
        ):
            self.add_error("responses_from", "Choose the run whose responses to grade.")
        elif data.get("source") == "physician" and not data.get("subset") and "subset" not in self.errors:
            self.add_error("subset", "Choose the subset whose physicians' responses to grade.")
        if data.get("stored_template") and data.get("grader_template"):
            self.add_error("stored_template", "Give a template's text or choose a stored one, not both.")
        for field in ("grader", "policy"):
            endpoint = data.get(field)
            if endpoint is not None and (field == "grader" or data.get("source") == "sample"):
                for problem in endpoint_problems(
                    base_url=endpoint.base_url, key_variable=endpoint.key_variable, resolve=False
                ):
                    self.add_error(field, f"{endpoint.name}: {problem}")
        if self.errors:
            return data
        try:
            spec_check(self.launch_request())
        except RunSpecError as exc:
            for problem in exc.problems:
                self.add_error(None, problem)
        return data

    @property
    def error_count(self) -> int:
        """The lines of the summary above the form: one per field with errors, one per form-wide error."""
        fields = [name for name in self.errors if name != NON_FIELD_ERRORS]
        return len(fields) + len(self.non_field_errors())

    def launch_request(self) -> RunRequest:
        """The run asked for: the chosen source's fields only (the page hides the other's), and
        the explanation length with a mode that takes one only (its field always has a value)."""
        data = self.cleaned_data
        sampled = data["source"] == "sample"
        physician = data["source"] == "physician"
        mode = data.get("grading_mode") or DEFAULT
        return run_request(
            name=data["name"],
            grader=data["grader"],
            template=data["grader_template"],
            stored_template=data.get("stored_template"),
            concurrency=data["concurrency"],
            use_cache=data["use_cache"],
            length_adjusted=data["length_adjusted"],
            healthbench_professional=data["healthbench_professional"],
            responses_from=data["responses_from"] if data["source"] == "responses" else None,
            rubric_changes=data["source"] == "responses" and data.get("rubric_changes", False),
            physician_responses=physician,
            subset=data["subset"] if sampled or physician else None,
            policy=data["policy"] if sampled else None,
            # One physician response per conversation: the hidden samples field does not apply.
            samples=data["samples"] if sampled else 1,
            grading_mode=mode,
            explanation_length=(data.get("explanation_length") or "") if mode_of(mode).takes_explanation else "",
            batch=data["batch"],
        )


@require_GET
@login_required
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    # Every run, imported ones and the demo's included: Reports lists them all, so this page does too.
    runs = Run.objects.select_related("grader_config", "policy_config").order_by("-created", "-id")
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "runs/run_list.html", {"page": page})


@require_http_methods(["GET", "POST"])
@login_required
def run_new(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the form. POST "estimate" (htmx: just the fragment): the estimate, and a launch
    button under it. POST "launch": launch and go to the run page."""
    require_role(request, *READERS)
    # A link may fill the form in (a report's "grade the difference"): nothing runs before a POST.
    initial: dict[str, object] = {k: request.GET[k] for k in ("name", "source", "responses_from") if k in request.GET}
    if request.GET.get("rubric_changes"):
        initial["rubric_changes"] = True
    form = RunForm(request.POST or None, initial=initial)
    context: dict[str, object] = {"form": form, "estimate": None, "endpoints": Endpoint.objects.exists()}
    if request.method == "POST" and raw_endpoint_fields(request.POST):
        form.is_valid()  # shows the refusal, and whatever else is wrong, beside the form
        template = "runs/run_new.html#run-form" if request.htmx else "runs/run_new.html"
        return render(request, template, context, status=400)
    status = 200
    if request.method == "POST" and form.is_valid():
        spec = form.launch_request()
        try:
            plan = run_plan(spec)
            context["estimate"] = plan_estimate(spec, plan)
            if request.POST.get("action") == "launch" and not request.htmx:
                # The API's launch limit, counted in the same place (an estimate is not counted).
                refusal = launch_refusal(request)
                if refusal is not None:
                    status, reason = refusal
                    form.add_error(None, reason)
                else:
                    run = run_launch(spec=spec, plan=plan)
                    launched = gettext("Launched %(name)s: %(total)s grades.")
                    messages.success(request, launched % {"name": run.name, "total": format(run.total_items, ",")})
                    return redirect("run_detail", code=run.code)
        except RunSpecError as exc:
            for problem in exc.problems:
                form.add_error(None, problem)
        except QueueUnavailable as exc:
            status = 503
            form.add_error(None, str(exc))
    if request.htmx:
        # The whole form comes back, so every error shows beside its own field.
        return render(request, "runs/run_new.html#run-form", context, status=status)
    return render(request, "runs/run_new.html", context, status=status)


@require_GET
@login_required
def run_detail(request: HtmxHttpRequest, code) -> HttpResponse:
    run = get_run_for_reader(request, code)
    context = {"run": run, "progress": run_progress(run=run)}
    if request.htmx:
        return render(request, "runs/run_detail.html#progress", context)
    context["grader_mark"] = grader_mark(run)
    context["ungradable"] = ungradable_conversations(run=run)
    return render(request, "runs/run_detail.html", context)


@require_POST
@login_required
def run_cancel_view(request: HtmxHttpRequest, code) -> HttpResponse:
    run = get_run_for_reader(request, code)
    if run_cancel(run=run):
        messages.success(request, gettext("Cancelled %(name)s. Grades stored so far are kept.") % {"name": run.name})
    else:
        messages.error(
            request,
            gettext("%(name)s is %(status)s: there is nothing to cancel.") % {"name": run.name, "status": run.status},
        )
    return redirect("run_detail", code=run.code)


@require_POST
@login_required
def run_retry_view(request: HtmxHttpRequest, code) -> HttpResponse:
    """Grade an ended run's failed grades again: a batched run's in a new provider batch, or
    live (the button the researcher pressed)."""
    run = get_run_for_reader(request, code)
    live = request.POST.get("how") == "live"
    if run.is_active or run.grader_config_id is None:
        messages.error(
            request,
            gettext("%(name)s is %(status)s: only an ended run graded here can be retried.")
            % {"name": run.name, "status": run.status},
        )
        return redirect("run_detail", code=run.code)
    try:
        queued = run_resume(run=run, retry_failed=True, live=live if run.batch else None)
    except (RunSpecError, QueueUnavailable) as exc:
        messages.error(request, str(exc))
        return redirect("run_detail", code=run.code)
    if not queued:
        retrying = gettext("%(name)s is complete.")
    elif run.batch and live:
        retrying = gettext("Retrying the failed grades of %(name)s by live calls.")
    elif run.batch:
        retrying = gettext("Retrying the failed grades of %(name)s in a new provider batch.")
    else:
        retrying = gettext("Retrying the failed grades of %(name)s.")
    messages.success(request, retrying % {"name": run.name})
    return redirect("run_detail", code=run.code)


RESUMABLE = (Run.Status.FAILED, Run.Status.CANCELLED, Run.Status.DONE)


@require_http_methods(["GET", "POST"])
@login_required
def run_resume_view(request: HtmxHttpRequest, code) -> HttpResponse:
    """GET: what resuming (``?retry=1``: retrying the failed grades too) would do, its estimate
    and a button to confirm. POST: resume, as `grade --resume [--retry-failed]` does."""
    run = get_run_for_reader(request, code)
    data = request.POST if request.method == "POST" else request.GET
    retry = data.get("retry") == "1"
    how = data.get("how", "")
    if run.is_active or run.grader_config_id is None or run.status not in RESUMABLE:
        messages.error(
            request,
            gettext("%(name)s is %(status)s: only an ended run graded here can be resumed.")
            % {"name": run.name, "status": run.status},
        )
        return redirect("run_detail", code=run.code)
    if request.method == "POST":
        live = (how == "live") if run.batch and retry else None
        try:
            queued = run_resume(run=run, retry_failed=retry, live=live)
        except (RunSpecError, QueueUnavailable) as exc:
            messages.error(request, str(exc))
            return redirect("run_detail", code=run.code)
        if not queued:
            resumed = gettext("%(name)s is complete.")
        elif retry:
            resumed = gettext("Retrying the failed grades of %(name)s: %(queued)s batch(es) queued.")
        else:
            resumed = gettext("Resumed %(name)s: %(queued)s batch(es) queued.")
        messages.success(request, resumed % {"name": run.name, "queued": queued})
        return redirect("run_detail", code=run.code)
    try:
        resume_check(run=run)
        problems: list[str] = []
    except RunSpecError as exc:
        problems = exc.problems
    context = {
        "run": run,
        "retry": retry,
        "how": how,
        "estimate": resume_estimate(run=run, retry_failed=retry),
        "problems": problems,
    }
    return render(request, "runs/run_resume.html", context)
