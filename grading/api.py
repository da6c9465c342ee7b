"""REST API for grading runs: create (with an estimate first), status, cancel, grades, reports;
and the curated endpoints, read-only, that a run names."""

from __future__ import annotations

from dataclasses import asdict

from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, Throttled, ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response as ApiResponse

from annotation.models import Subset
from grading.api_filters import GradeFilter, RunFilter
from grading.api_serializers import (
    CalibrationReportSerializer,
    CalibrationSampleSerializer,
    MetaEvalReportSerializer,
    RunReportSerializer,
)
from grading.calibration.report import calibration_report_cached, with_calibration
from grading.calibration.sample import SampleError, calibration_sample_draw, calibration_sample_preview
from grading.endpoint_rules import RAW_FIELDS_MESSAGE, raw_endpoint_fields
from grading.metaeval.report import run_meta_eval_report_cached
from grading.models import Endpoint, ExplanationLength, Grade, GraderTemplate, GradingMode, Run
from grading.pipeline.estimate import plan_estimate, run_plan, spec_check
from grading.pipeline.modes import DEFAULT
from grading.pipeline.progress import run_progress
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import DEFAULT_CONCURRENCY, RunRequest, RunSpecError, run_request
from grading.pipeline.runs import QueueUnavailable, run_cancel, run_resume
from grading.reports.report import run_report_document
from healthbench_web.api_permissions import ReadersOnly, ResearchersWrite
from healthbench_web.throttles import RunLaunchThrottle


class QueueDown(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "queue_unavailable"


def _money(value) -> str | None:
    return None if value is None else f"{value:.6f}"


class NamedField(serializers.SlugRelatedField):
    """A related object by name; a name with a NUL is refused here, since PostgreSQL cannot
    look it up (a multipart form body is not checked by the NUL middleware)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value="(a name with a NUL character)")
        return super().to_internal_value(data)


class RunSerializer(serializers.ModelSerializer):
    grader_model = serializers.CharField(source="grader_config.model", default="", read_only=True)
    grader_endpoint = serializers.CharField(source="grader_config.endpoint_name", default="", read_only=True)
    policy_endpoint = serializers.CharField(source="policy_config.endpoint_name", default="", read_only=True)
    # Null for a run of an existing run's responses (responses_from), and for an imported run.
    subset: serializers.SlugRelatedField[Subset] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    subset_version = serializers.SerializerMethodField()
    # Null for a run that sampled a policy on a subset, and for an imported run.
    responses_from: serializers.SlugRelatedField[Run] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    progress = serializers.SerializerMethodField()
    # Null for an imported run, which records no mode (and the schema says so).
    grading_mode = serializers.ChoiceField(
        choices=GradingMode.choices, source="grader_config.grading_mode", default=None, read_only=True, allow_null=True
    )
    explanation_length = serializers.CharField(
        source="grader_config.explanation_length",
        default=None,
        read_only=True,
        allow_null=True,
        help_text="per response: words, sentence or sentences; empty per criterion; null for an imported run",
    )

    class Meta:
        model = Run
        fields = [
            "code",
            "name",
            "status",
            "plan",
            "grader_endpoint",
            "grader_model",
            "policy_endpoint",
            "policy_model",
            "samples",
            "subset",
            "subset_version",
            "responses_from",
            "physician_responses",
            "use_cache",
            "concurrency",
            "total_items",
            "error",
            "created",
            "started",
            "finished",
            "progress",
            "healthbench_professional",
            "length_adjusted",
            "length_centre",
            "length_penalty",
            "batch",
            "grading_mode",
            "explanation_length",
        ]

    def get_subset_version(self, run: Run) -> dict | None:
        version = run.subset_version
        if version is None:
            return None
        return {"subset": version.subset.name, "number": version.number, "content_hash": version.content_hash}

    def get_progress(self, run: Run) -> dict:
        progress = run_progress(run=run)
        return {
            "total": progress.total,
            "done": progress.done,
            "graded": progress.graded,
            "failed": progress.failed,
            "remaining": progress.remaining,
            "reused": progress.reused,
            "percent": round(progress.percent, 2),
            "rate_per_second": progress.rate,
            "seconds_left": progress.seconds_left,
            "tokens": progress.tokens,
            "failed_samples": progress.failed_samples,
            "calls": progress.calls,
            "fallbacks": progress.fallbacks,
            "refused_samples": progress.refused_samples,
            "truncated_samples": progress.truncated_samples,
            "warning": progress.warning,
            "sample_notes": progress.sample_notes,
            "usage": {
                "grader": {
                    "prompt_tokens": progress.prompt_tokens,
                    "cached_tokens": progress.cached_tokens,
                    "completion_tokens": progress.completion_tokens,
                    "reasoning_tokens": progress.reasoning_tokens,
                    "cache_write_tokens": progress.cache_write_tokens,
                },
                "policy": {
                    "prompt_tokens": progress.sample_prompt_tokens,
                    "cached_tokens": progress.sample_cached_tokens,
                    "completion_tokens": progress.sample_completion_tokens,
                    "reasoning_tokens": progress.sample_reasoning_tokens,
                    "cache_write_tokens": progress.sample_cache_write_tokens,
                },
            },
            # Dollars as strings (exact decimals); null: no prices configured for an endpoint.
            "cost_usd": _money(progress.cost),
            "grader_cost_usd": _money(progress.grader_cost),
            "policy_cost_usd": _money(progress.sample_cost),
            # A batched run's provider batches (the provider's Batch API), as last polled.
            "provider_batches": {
                "summary": progress.provider_batch_line,
                "by_status": progress.provider_batch_counts,
                "batches": [
                    {
                        "id": state.batch_id or None,
                        "status": state.status,
                        "round": state.round,
                        "requests": state.requests,
                        "completed": state.completed,
                        "failed": state.failed,
                        "collected": state.collected,
                        "error": state.error,
                    }
                    for state in progress.provider_batches
                ],
            },
        }


class RunCreateSerializer(serializers.Serializer):
    """Grade an existing run's responses again (responses_from), the physician-labelled items
    (labelled), the physicians' responses of a subset's Professional rows (physician_responses),
    or sample a policy endpoint on a subset. Endpoints are named (GET
    /api/endpoints/); base URLs and key variables are curators' settings and are refused here."""

    name = serializers.CharField(max_length=200)
    grader = NamedField(slug_field="name", queryset=Endpoint.objects.all(), help_text="The name of a grader endpoint")
    grader_template = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="A grader template's text with <<conversation>> and <<rubric_item>> (empty: ours).",
    )
    stored_template = NamedField(
        slug_field="name",
        queryset=GraderTemplate.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="Instead of grader_template: the name of a template stored with grader_template import.",
    )
    concurrency = serializers.IntegerField(required=False, default=DEFAULT_CONCURRENCY)
    use_cache = serializers.BooleanField(required=False, default=True)
    responses_from = NamedField(
        slug_field="name", queryset=Run.objects.all(), required=False, allow_null=True, default=None
    )
    labelled = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Grade every physician-labelled (response, consensus criterion), for the meta-eval report.",
    )
    rubric_changes = serializers.BooleanField(
        required=False,
        default=False,
        help_text="With responses_from: grade only the criteria added or edited since that run (its rubric drift).",
    )
    physician_responses = serializers.BooleanField(
        required=False,
        default=False,
        help_text="With subset: grade the physicians' responses of its HealthBench Professional rows (the "
        'physician baseline; its model is "physician").',
    )
    policy = NamedField(
        slug_field="name",
        queryset=Endpoint.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="The name of the policy endpoint to sample (with subset)",
    )
    samples = serializers.IntegerField(required=False, default=1, min_value=1, max_value=100)
    subset = NamedField(slug_field="name", queryset=Subset.objects.all(), required=False, allow_null=True, default=None)
    length_adjusted = serializers.BooleanField(
        required=False, default=False, help_text="Report HealthBench Professional's length-adjusted scores too."
    )
    healthbench_professional = serializers.BooleanField(
        required=False, default=False, help_text="Mark the run as HealthBench Professional (length-adjusted)."
    )
    grading_mode = serializers.ChoiceField(
        choices=GradingMode.choices,
        required=False,
        default=DEFAULT,
        help_text="per-criterion (one call per response and criterion) or per-response (one call per response).",
    )
    explanation_length = serializers.ChoiceField(
        choices=ExplanationLength.choices,
        required=False,
        allow_blank=True,
        default="",
        help_text="Per response only: how long each verdict's explanation is (default: sentence).",
    )
    batch = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Grade through the provider's Batch API: at its discount, answers within 24 hours.",
    )
    dry_run = serializers.BooleanField(required=False, default=False, help_text="Only return the estimate.")

    def validate(self, attrs: dict) -> dict:
        raw = raw_endpoint_fields(self.initial_data)
        if raw:
            raise ValidationError({name: [RAW_FIELDS_MESSAGE] for name in raw})
        return attrs

    def launch_request(self) -> RunRequest:
        data = self.validated_data
        return run_request(
            name=data["name"],
            grader=data["grader"],
            template=data["grader_template"],
            stored_template=data["stored_template"],
            concurrency=data["concurrency"],
            use_cache=data["use_cache"],
            length_adjusted=data["length_adjusted"],
            healthbench_professional=data["healthbench_professional"],
            responses_from=data["responses_from"],
            labelled=data["labelled"],
            physician_responses=data["physician_responses"],
            rubric_changes=data["rubric_changes"],
            subset=data["subset"],
            policy=data["policy"],
            samples=data["samples"],
            grading_mode=data["grading_mode"],
            explanation_length=data["explanation_length"],
            batch=data["batch"],
        )


class RunRetrySerializer(serializers.Serializer):
    live = serializers.BooleanField(
        required=False,
        default=False,
        help_text="For a batched run: retry its failed requests by live calls instead of a new provider batch.",
    )


class EndpointSerializer(serializers.ModelSerializer):
    """What a researcher needs to choose an endpoint; not where its key comes from."""

    class Meta:
        model = Endpoint
        fields = [
            "name",
            "model",
            "api_style",
            "reasoning",
            "reasoning_effort",
            "temperature",
            "max_output_tokens",
            "structured_output",
            "lenient_answers",
            "price_input",
            "price_cached_input",
            "price_output",
            "batch_discount",
            "requests_per_minute",
            "tokens_per_minute",
            "max_concurrency",
            "notes",
        ]


class EndpointViewSet(viewsets.ReadOnlyModelViewSet):
    """The curated grader and policy endpoints, by name (curators edit them in the browser)."""

    permission_classes = [ReadersOnly]
    serializer_class = EndpointSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    queryset = Endpoint.objects.order_by("name")


class GradeSerializer(serializers.ModelSerializer):
    response = serializers.UUIDField(source="response.code", read_only=True)
    prompt_id = serializers.CharField(source="response.conversation.prompt_id", read_only=True)

    class Meta:
        model = Grade
        fields = [
            "id",
            "response",
            "prompt_id",
            "position",
            "criterion_text",
            "points",
            "tags",
            "status",
            "met",
            "explanation",
            "error",
            "attempts",
            "prompt_tokens",
            "completion_tokens",
            "cached_tokens",
            "reasoning_tokens",
            "reused",
            "batched",
            "mode",
        ]


@extend_schema_view(
    create=extend_schema(
        request=RunCreateSerializer,
        responses={
            201: RunSerializer,
            429: OpenApiResponse(description="Too many launches by this user (API_RUN_LAUNCH_RATE); see Retry-After."),
        },
    )
)
class RunViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [ResearchersWrite]
    serializer_class = RunSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filterset_class = RunFilter

    def _runs(self):
        query = Run.objects.select_related(
            "grader_config", "policy_config", "subset", "subset_version__subset", "responses_from"
        )
        return query.order_by("-created", "-id")

    def get_queryset(self):
        if self.action == "grades":
            # What the grades action filters and pages (and what its schema's filters describe).
            return Grade.objects.select_related("response__conversation").order_by("response_id", "position")
        return self._runs()

    def get_serializer_class(self):
        return RunCreateSerializer if self.action == "create" else RunSerializer

    def get_object(self) -> Run:
        # The filters narrow lists (the runs, a run's grades); finding the run itself ignores them.
        run = get_object_or_404(self._runs(), name=self.kwargs["name"])
        self.check_object_permissions(self.request, run)
        return run

    def get_throttles(self):
        # Only a real launch starts paid calls; an estimate (dry_run) is not counted.
        if self.action == "create" and not _dry_run(self.request.data):
            return [RunLaunchThrottle()]
        return super().get_throttles()

    def throttled(self, request, wait):
        raise Throttled(wait, detail=RunLaunchThrottle().refusal(wait))

    def create(self, request, *args, **kwargs):
        if raw_endpoint_fields(request.data):
            # Before anything else: a request that names a URL or variable is refused whole.
            raw = raw_endpoint_fields(request.data)
            raise ValidationError({name: [RAW_FIELDS_MESSAGE] for name in raw})
        form = RunCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            spec = form.launch_request()
            spec_check(spec)  # before planning: a plan assumes a well-formed spec
            plan = run_plan(spec)
            estimate = plan_estimate(spec, plan)
            if form.validated_data["dry_run"]:
                data = asdict(estimate) | {"total_tokens": estimate.total_tokens}
                for key in ("grader_cost", "policy_cost"):
                    data[key] = _money(data[key])
                data["cost_usd"] = _money(estimate.cost)
                data["cost_note"] = estimate.cost_line()
                return ApiResponse({"estimate": data})
            run = run_launch(spec=spec, plan=plan)
        except RunSpecError as exc:
            raise ValidationError({"non_field_errors": exc.problems}) from None
        except QueueUnavailable as exc:
            raise QueueDown(str(exc)) from None
        return ApiResponse(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: RunSerializer, 409: None})
    @action(detail=True, methods=["post"])
    def cancel(self, request, name=None):
        run = self.get_object()
        if not run_cancel(run=run):
            refused = gettext("%(name)s is %(status)s: there is nothing to cancel.")
            return ApiResponse({"detail": refused % {"name": run.name, "status": run.status}}, status=409)
        run.refresh_from_db()
        return ApiResponse(RunSerializer(run).data)

    @extend_schema(request=RunRetrySerializer, responses={200: RunSerializer, 409: None})
    @action(detail=True, methods=["post"])
    def retry(self, request, name=None):
        """Grade the run's failed grades again: a batched run's in a new provider batch, or live."""
        run = self.get_object()
        form = RunRetrySerializer(data=request.data)
        form.is_valid(raise_exception=True)
        if run.is_active or run.grader_config_id is None:
            refused = gettext("%(name)s is %(status)s: only an ended, graded run is retried.")
            return ApiResponse({"detail": refused % {"name": run.name, "status": run.status}}, status=409)
        live = form.validated_data["live"] if run.batch else None
        _queue_again(run, retry_failed=True, live=live, doing=gettext("its failed grades cannot be retried"))
        run.refresh_from_db()
        return ApiResponse(RunSerializer(run).data)

    @extend_schema(request=None, responses={200: RunSerializer, 409: None})
    @action(detail=True, methods=["post"])
    def resume(self, request, name=None):
        """Queue again the batches of an ended run that still miss grades (as `grade --resume`)."""
        run = self.get_object()
        if run.is_active or run.grader_config_id is None or run.status not in RESUMABLE:
            refused = gettext("%(name)s is %(status)s: only an ended run graded here can be resumed.")
            return ApiResponse({"detail": refused % {"name": run.name, "status": run.status}}, status=409)
        _queue_again(run, retry_failed=False, live=None, doing=gettext("it cannot be resumed"))
        run.refresh_from_db()
        return ApiResponse(RunSerializer(run).data)

    @extend_schema(filters=True, responses={200: GradeSerializer(many=True)})
    @action(detail=True, methods=["get"], filterset_class=GradeFilter)
    def grades(self, request, name=None):
        run = self.get_object()
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset().filter(run=run)))
        return self.get_paginated_response(GradeSerializer(page, many=True).data)

    @extend_schema(responses={200: RunReportSerializer})
    @action(detail=True, methods=["get"])
    def report(self, request, name=None):
        """The score report: the reference's metric names plus worst-at-k, error rates and counts."""
        run = self.get_object()
        return ApiResponse(with_calibration(run, run_report_document(run=run)))

    @extend_schema(
        responses={200: MetaEvalReportSerializer},
        parameters=[OpenApiParameter("seed", int, description="seed of the bootstrap resamples (default 0)")],
    )
    @action(detail=True, methods=["get"], url_path="meta-eval")
    def meta_eval(self, request, name=None):
        """Grader-vs-physician agreement on the consensus items this run graded."""
        seed = serializers.IntegerField(min_value=0, max_value=2**32 - 1)
        try:
            value = seed.run_validation(request.query_params.get("seed", 0))
        except serializers.ValidationError as exc:
            raise ValidationError({"seed": exc.detail}) from None
        return ApiResponse(run_meta_eval_report_cached(run=self.get_object(), seed=value))

    @extend_schema(
        request=CalibrationSampleSerializer,
        responses={200: CalibrationReportSerializer, 201: CalibrationReportSerializer, 404: None},
    )
    @action(detail=True, methods=["get", "post"])
    def calibration(self, request, name=None):
        """GET: the physician-calibrated score. POST: draw the run's calibration sample (once)."""
        run = self.get_object()
        if request.method == "POST":
            form = CalibrationSampleSerializer(data=request.data)
            form.is_valid(raise_exception=True)
            options = {
                "run": run,
                "size": form.validated_data["n"],
                "seed": form.validated_data["seed"],
                "by_theme": form.validated_data["by_theme"],
                "physicians_per_response": form.validated_data["physicians"],
            }
            try:
                if form.validated_data["dry_run"]:
                    return ApiResponse({"preview": asdict(calibration_sample_preview(**options))})
                calibration_sample_draw(**options, created_by=request.user.get_username())
            except SampleError as exc:
                raise ValidationError({"non_field_errors": [str(exc)]}) from None
            return ApiResponse(calibration_report_cached(run), status=status.HTTP_201_CREATED)
        data = calibration_report_cached(run)
        if data is None:
            missing = gettext("%(name)s has no calibration sample: POST n and seed here to draw one.")
            return ApiResponse({"detail": missing % {"name": run.name}}, status=404)
        return ApiResponse(data)


# The ended runs that may be queued again (as the run page's Resume button).
RESUMABLE = (Run.Status.FAILED, Run.Status.CANCELLED, Run.Status.DONE)


def _queue_again(run: Run, *, retry_failed: bool, live: bool | None, doing: str) -> None:
    """run_resume, its refusals as the API answers them: 400 for the run's endpoints, 503 with a
    sentence while the task queue is down (nothing changed then, as for a launch)."""
    try:
        run_resume(run=run, retry_failed=retry_failed, live=live)
    except RunSpecError as exc:
        raise ValidationError({"non_field_errors": exc.problems}) from None
    except QueueUnavailable as exc:
        raise QueueDown(
            gettext(
                "%(name)s: %(doing)s right now, the task queue is unreachable (%(cause)s). "
                "Nothing was changed; try again once it is back (/healthz/ says what is down)."
            )
            % {"name": run.name, "doing": doing, "cause": exc.cause}
        ) from None


def _dry_run(data) -> bool:
    if not hasattr(data, "get"):
        return False  # not an object: the serializer will refuse it, and it launches nothing
    try:
        return bool(serializers.BooleanField().to_internal_value(data.get("dry_run", False)))
    except serializers.ValidationError:
        return False
