"""Grading runs in the browser: launch one (estimate first), watch it, cancel it.

Researchers and curators only; physicians never see grader output. The run page polls its
progress fragment every two seconds with htmx while the run is active.
"""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.html import escape
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from annotation.access import require_role
from annotation.models import Subset
from grading.access import READERS, get_run_for_reader
from grading.models import Run
from grading.pipeline.estimate import (
    MAX_CONCURRENCY,
    EndpointSpec,
    RunSpec,
    RunSpecError,
    plan_estimate,
    run_plan,
    spec_check,
)
from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE
from grading.pipeline.progress import run_progress
from grading.pipeline.runs import run_cancel, run_launch

RUNS_PER_PAGE = 50


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


class RunForm(forms.Form):
    """The same choices as `manage.py grade`."""

    SOURCES = [("responses", "The responses of an existing run"), ("sample", "New samples from a policy model")]

    name = forms.CharField(max_length=200)
    source = forms.ChoiceField(choices=SOURCES, initial="responses", widget=forms.RadioSelect)
    responses_from = forms.ModelChoiceField(
        Run.objects.order_by("-created"), to_field_name="code", required=False, label="Responses of run"
    )
    subset = forms.ModelChoiceField(Subset.objects.order_by("name"), to_field_name="code", required=False)
    policy_model = forms.CharField(max_length=200, required=False)
    policy_base_url = forms.CharField(max_length=200, required=False, label="Policy base URL")
    policy_api_key_env = forms.CharField(
        max_length=100, required=False, initial="OPENAI_API_KEY", label="Policy API key variable"
    )
    samples = forms.IntegerField(min_value=1, max_value=100, initial=1, label="Samples per conversation")
    policy_temperature = forms.FloatField(min_value=0, max_value=2, initial=1.0)
    policy_max_tokens = forms.IntegerField(min_value=1, initial=2048)

    grader_model = forms.CharField(max_length=200)
    grader_base_url = forms.CharField(
        max_length=200, required=False, label="Grader base URL", help_text="Empty for OpenAI"
    )
    grader_api_key_env = forms.CharField(
        max_length=100, required=False, initial="OPENAI_API_KEY", label="Grader API key variable",
        help_text="The name of the environment variable the workers read the key from; empty for none",
    )  # fmt: skip
    grader_temperature = forms.FloatField(min_value=0, max_value=2, initial=0.0)
    grader_max_tokens = forms.IntegerField(min_value=1, initial=2048)
    grader_timeout = forms.FloatField(min_value=0.1, initial=60.0, label="Grader timeout (s)")
    grader_rpm = forms.IntegerField(
        min_value=1, required=False, label="Requests per minute", help_text="Empty for no limit"
    )
    grader_tpm = forms.IntegerField(
        min_value=1, required=False, label="Tokens per minute", help_text="Empty for no limit"
    )
    grader_template = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}), required=False,
        # Form help text is not escaped: the placeholders would read as HTML tags.
        help_text=escape("Empty for ours; otherwise a template with <<conversation>> and <<rubric_item>>"),
    )  # fmt: skip
    concurrency = forms.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, initial=16)
    use_cache = forms.BooleanField(required=False, initial=True, label="Reuse grades of identical earlier requests")
    length_adjusted = forms.BooleanField(
        required=False, label="Report length-adjusted scores",
        help_text="HealthBench Professional's adjustment: 0.0147 off per 500 characters beyond 2,000",
    )  # fmt: skip
    healthbench_professional = forms.BooleanField(
        required=False, label="HealthBench Professional run", help_text="Scores with the length adjustment"
    )

    GROUPS = [
        ("What to grade", ["name", "source", "responses_from", "subset", "policy_model", "policy_base_url",
                           "policy_api_key_env", "samples", "policy_temperature", "policy_max_tokens"]),
        ("Grader", ["grader_model", "grader_base_url", "grader_api_key_env", "grader_temperature",
                    "grader_max_tokens", "grader_timeout", "grader_rpm", "grader_tpm", "grader_template"]),
        ("Run", ["concurrency", "use_cache", "length_adjusted", "healthbench_professional"]),
    ]  # fmt: skip

    # Fields that apply to one source only: the page hides the others while that source is chosen.
    SOURCE_ONLY = {
        "responses_from": "responses",
        **dict.fromkeys(
            ["subset", "policy_model", "policy_base_url", "policy_api_key_env", "samples", "policy_temperature",
             "policy_max_tokens"],
            "sample",
        ),
    }  # fmt: skip

    def groups(self) -> list[tuple[str, list[tuple[forms.BoundField, str]]]]:
        """Per fieldset, each field with the source it belongs to ('' for all)."""
        return [
            (legend, [(self[name], self.SOURCE_ONLY.get(name, "")) for name in names]) for legend, names in self.GROUPS
        ]

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        try:
            spec_check(self.spec())
        except RunSpecError as exc:
            for problem in exc.problems:
                self.add_error(None, problem)
        return data

    def spec(self) -> RunSpec:
        data = self.cleaned_data
        sampled = data["source"] == "sample"
        return RunSpec(
            name=data["name"],
            grader=EndpointSpec(
                model=data["grader_model"],
                base_url=data["grader_base_url"],
                api_key_env=data["grader_api_key_env"],
                temperature=data["grader_temperature"],
                max_tokens=data["grader_max_tokens"],
                timeout=data["grader_timeout"],
                requests_per_minute=data["grader_rpm"],
                tokens_per_minute=data["grader_tpm"],
            ),
            template=data["grader_template"].replace("\r\n", "\n") or DEFAULT_TEMPLATE,
            concurrency=data["concurrency"],
            use_cache=data["use_cache"],
            length_adjusted=data["length_adjusted"],
            healthbench_professional=data["healthbench_professional"],
            responses_from=None if sampled else data["responses_from"],
            subset=data["subset"] if sampled else None,
            policy=EndpointSpec(
                model=data["policy_model"],
                base_url=data["policy_base_url"],
                api_key_env=data["policy_api_key_env"],
                temperature=data["policy_temperature"],
                max_tokens=data["policy_max_tokens"],
            )
            if sampled
            else None,
            samples=data["samples"],
        )


@require_GET
@login_required
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    runs = Run.objects.filter(grader_config__isnull=False).select_related("grader_config").order_by("-created", "-id")
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "runs/run_list.html", {"page": page})


@require_http_methods(["GET", "POST"])
@login_required
def run_new(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the form. POST "estimate" (htmx: just the fragment): the estimate, and a launch
    button under it. POST "launch": launch and go to the run page."""
    require_role(request, *READERS)
    form = RunForm(request.POST or None)
    context = {"form": form, "estimate": None}
    if request.method == "POST" and form.is_valid():
        spec = form.spec()
        try:
            plan = run_plan(spec)
            if request.POST.get("action") == "launch" and not request.htmx:
                run = run_launch(spec=spec, plan=plan)
                messages.success(request, f"Launched {run.name}: {run.total_items:,} grades.")
                return redirect("run_detail", code=run.code)
            context["estimate"] = plan_estimate(spec, plan)
        except RunSpecError as exc:
            for problem in exc.problems:
                form.add_error(None, problem)
    if request.htmx:
        # The whole form comes back, so every error shows beside its own field.
        return render(request, "runs/run_new.html#run-form", context)
    return render(request, "runs/run_new.html", context)


@require_GET
@login_required
def run_detail(request: HtmxHttpRequest, code) -> HttpResponse:
    run = get_run_for_reader(request, code)
    context = {"run": run, "progress": run_progress(run=run)}
    if request.htmx:
        return render(request, "runs/run_detail.html#progress", context)
    return render(request, "runs/run_detail.html", context)


@require_POST
@login_required
def run_cancel_view(request: HtmxHttpRequest, code) -> HttpResponse:
    run = get_run_for_reader(request, code)
    if run_cancel(run=run):
        messages.success(request, f"Cancelled {run.name}. Grades stored so far are kept.")
    else:
        messages.error(request, f"{run.name} is {run.status}: there is nothing to cancel.")
    return redirect("run_detail", code=run.code)
