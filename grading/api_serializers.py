"""Response schemas of the report and meta-eval endpoints.

The documents themselves are built by grading.reports.report and grading.metaeval.report (the
command, the pages and the downloads use the same ones); these serializers describe them in
the OpenAPI schema, field by field, and tests/test_api_limits.py checks that the documents the
API returns validate against them. A field added to a document is added here as well: one
line per field, each nested part its own small serializer.
"""

from rest_framework import serializers

from grading.models import GradingMode

# --- the score report ---------------------------------------------------------------------


class ReportCountsSerializer(serializers.Serializer):
    grades = serializers.IntegerField(help_text="grade rows of the run")
    graded = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="grades that failed: missing, never 'not met'")
    missing = serializers.IntegerField(help_text="criteria the run should have graded but holds no row for")
    examples = serializers.IntegerField(help_text="responses")
    examples_scored = serializers.IntegerField()
    examples_left_out = serializers.IntegerField()
    examples_incomplete = serializers.IntegerField()
    examples_unscorable = serializers.IntegerField()
    refusals = serializers.IntegerField(help_text="responses that are a policy model's refusal, graded as its answer")
    truncated = serializers.IntegerField(
        help_text="responses cut off at their output limit, graded as far as they went"
    )


class ErrorRateSerializer(serializers.Serializer):
    error_rate = serializers.FloatField(allow_null=True)
    n_errors = serializers.IntegerField()
    n_graded = serializers.IntegerField()
    n_missing = serializers.IntegerField()


class LengthAdjustmentSerializer(serializers.Serializer):
    centre = serializers.IntegerField(help_text="characters at which the adjustment is zero")
    penalty_per_500 = serializers.FloatField(help_text="score taken off per 500 characters above the centre")


class BootstrapSerializer(serializers.Serializer):
    method = serializers.ChoiceField(
        choices=["one-draw", "multinomial", "shared", "per-metric"],
        help_text="one-draw: the reference's draw (n of n with replacement), every metric's from one draw of the "
        "examples per resample; multinomial: the same, one resampling per set of examples (runs recorded "
        "before it); shared: Poisson weights (older runs, high at small n); per-metric: older runs",
    )
    description = serializers.CharField()


class GradingRecordSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(choices=GradingMode.choices)
    prompt_sha256 = serializers.CharField(help_text="sha256 of the per-criterion grader template")
    explanation_length = serializers.CharField(required=False, help_text="per response: words, sentence, sentences")
    criteria_per_call = serializers.IntegerField(required=False, help_text="per response: the most criteria a call")
    response_prompt_sha256 = serializers.CharField(required=False, help_text="per response: its template's sha256")
    fallbacks = serializers.IntegerField(
        required=False, help_text="per response: criteria graded by a call of their own (their entry was unusable)"
    )


class ResponsesRecordSerializer(serializers.Serializer):
    origin = serializers.ChoiceField(
        choices=["physician", "sampled", "run", "labelled", "stored"],
        help_text="physician: the physicians' responses of HealthBench Professional rows; sampled: from a policy "
        "endpoint; run: another run's; labelled: the physician-labelled items; stored: an imported run's",
    )
    model = serializers.CharField(
        allow_blank=True, help_text="the responses' model (\"physician\" for the physicians'); may be empty"
    )


class RunReportSerializer(serializers.Serializer):
    score = serializers.FloatField(allow_null=True, help_text="clipped mean of the scored responses")
    metrics = serializers.DictField(
        child=serializers.FloatField(),
        help_text="numbers under simple-evals names: overall_score, theme:..., axis:..., cluster:..., each with "
        ":n_samples and :bootstrap_std",
    )
    worst_at_k = serializers.DictField(child=serializers.FloatField(), help_text="k (as text) -> expected worst score")
    consensus_error_rates = serializers.DictField(child=ErrorRateSerializer(), help_text="per cluster tag")
    length_score_correlation = serializers.FloatField(allow_null=True)
    counts = ReportCountsSerializer()
    reused = serializers.IntegerField(help_text="grades taken over from an earlier run")
    length_adjustment = LengthAdjustmentSerializer(
        allow_null=True, help_text="HealthBench Professional's constants, when the run adjusts for length"
    )
    bootstrap = BootstrapSerializer(help_text="how the :bootstrap_std figures were drawn")
    grader = serializers.DictField(
        allow_null=True, help_text="how the grader compares with the reference's (grading.reports.grader_marks)"
    )
    grading = GradingRecordSerializer(allow_null=True, help_text="how the grader was asked; null for an imported run")
    responses = ResponsesRecordSerializer(help_text="whose responses the run graded")
    calibration = serializers.DictField(
        required=False,
        help_text="the physician-calibrated score (the same document as GET /api/runs/NAME/calibration/); "
        "present only when the run has a calibration sample",
    )


# --- the calibrated score -----------------------------------------------------------------


class BoundsSerializer(serializers.Serializer):
    low = serializers.FloatField()
    high = serializers.FloatField()


class CalibrationSerializer(serializers.Serializer):
    n = serializers.IntegerField(help_text="sampled responses scored by physicians")
    n_run = serializers.IntegerField(help_text="responses scored by the grader")
    estimate = serializers.FloatField(allow_null=True, help_text="the calibrated score (PPI++)")
    se = serializers.FloatField(allow_null=True)
    lam = serializers.FloatField(allow_null=True, help_text="PPI++ power tuning; null when combined over strata")
    interval = BoundsSerializer(allow_null=True, help_text="95%, t(n - 2); null below 30 responses")
    no_interval_reason = serializers.CharField(allow_blank=True)
    grader_only = serializers.FloatField()
    grader_only_interval = BoundsSerializer(allow_null=True)
    physician_only = serializers.FloatField(allow_null=True)
    physician_only_interval = BoundsSerializer(allow_null=True)
    bias = serializers.FloatField(allow_null=True, help_text="mean physician minus grader score on the sample")
    effective_n = serializers.FloatField(allow_null=True, help_text="physician-only labels the interval is worth")


class CalibrationDesignSerializer(serializers.Serializer):
    size = serializers.IntegerField()
    seed = serializers.IntegerField()
    by_theme = serializers.BooleanField()
    physicians_per_response = serializers.IntegerField()
    drawn = serializers.DateTimeField()


class CalibrationProgressSerializer(serializers.Serializer):
    sampled = serializers.IntegerField()
    labelled = serializers.IntegerField()
    complete = serializers.BooleanField()


class CalibrationDisagreementSerializer(serializers.Serializer):
    responses_with_two = serializers.IntegerField()
    mean_absolute_difference = serializers.FloatField(allow_null=True)


class CalibrationReportSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    method = serializers.CharField()
    design = CalibrationDesignSerializer()
    progress = CalibrationProgressSerializer()
    physician_disagreement = CalibrationDisagreementSerializer()
    overall = CalibrationSerializer()
    themes = serializers.DictField(child=CalibrationSerializer())


class CalibrationSampleSerializer(serializers.Serializer):
    n = serializers.IntegerField(min_value=2, max_value=2000, help_text="responses to sample")
    seed = serializers.IntegerField(min_value=0, max_value=2**63 - 1, help_text="seed of the random draw")
    by_theme = serializers.BooleanField(default=False, help_text="stratify by theme")
    physicians = serializers.ChoiceField(choices=(1, 2), default=1, help_text="physicians per sampled response")
    dry_run = serializers.BooleanField(default=False, help_text="only say what drawing would do")


# --- the meta-eval report -----------------------------------------------------------------


class MetricSerializer(serializers.Serializer):
    n = serializers.IntegerField(help_text="pairs behind the value")
    value = serializers.FloatField()


class IntervalSerializer(serializers.Serializer):
    value = serializers.FloatField()
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    n_defined = serializers.IntegerField()
    n_resamples = serializers.IntegerField()


class RankSerializer(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    n_physicians = serializers.IntegerField()
    n_higher = serializers.IntegerField(allow_null=True)
    n_tied = serializers.IntegerField(allow_null=True)
    n_lower = serializers.IntegerField(allow_null=True)
    rank = serializers.IntegerField(allow_null=True)
    percentile = serializers.FloatField(allow_null=True)


class ChanceMetricSerializer(serializers.Serializer):
    value = serializers.FloatField(allow_null=True, help_text="None where undefined")
    n = serializers.IntegerField()
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    n_defined = serializers.IntegerField()
    n_resamples = serializers.IntegerField()


class MetaEvalSettingsSerializer(serializers.Serializer):
    seed = serializers.IntegerField()
    n_resamples = serializers.IntegerField()
    confidence = serializers.FloatField()


class MetaEvalCoverageSerializer(serializers.Serializer):
    items = serializers.IntegerField()
    items_without_grader_label = serializers.IntegerField()
    labels = serializers.IntegerField()
    physicians = serializers.IntegerField()
    categories = serializers.IntegerField()
    labels_merged = serializers.IntegerField(help_text="repeated listings of a physician on an item, kept as one")
    cant_judge = serializers.IntegerField(help_text="physicians' \"can't judge\" answers on these items, not labels")


class FlaggedItemSerializer(serializers.Serializer):
    prompt_id = serializers.CharField()
    completion_id = serializers.CharField()
    category = serializers.CharField()
    grader = serializers.BooleanField()
    n_met = serializers.IntegerField()
    n_not_met = serializers.IntegerField()


class ReviewCauseSerializer(serializers.Serializer):
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="'overall' and each cluster tag")
    items = FlaggedItemSerializer(many=True)


class ReviewSerializer(serializers.Serializer):
    physicians_split = ReviewCauseSerializer(
        help_text="physicians disagree among themselves: the criterion may be unclear"
    )
    grader_against_agreeing_physicians = ReviewCauseSerializer(
        help_text="two or more physicians agree and the grader says the opposite"
    )


class MetaEvalReportSerializer(serializers.Serializer):
    run = serializers.CharField()
    settings = MetaEvalSettingsSerializer()
    coverage = MetaEvalCoverageSerializer()
    model = serializers.DictField(child=MetricSerializer(), help_text="the grader's metrics, reference names")
    physicians = serializers.DictField(
        child=serializers.DictField(child=MetricSerializer()), help_text="metric -> physician id -> metric"
    )
    intervals = serializers.DictField(child=IntervalSerializer(), help_text="bootstrap intervals of the macro F1")
    ranks = serializers.DictField(child=RankSerializer(), help_text="the grader among the physicians")
    cohen_kappa = serializers.DictField(child=ChanceMetricSerializer(), help_text="grader vs physicians, per scope")
    krippendorff_alpha = serializers.DictField(child=ChanceMetricSerializer(), help_text="among physicians, per scope")
    disagreements = FlaggedItemSerializer(many=True)
    ties = FlaggedItemSerializer(many=True)
    review = ReviewSerializer()
    grader = serializers.DictField(
        allow_null=True,
        help_text="the run's grader and prompt, as the score report names them (grading.reports.grader_marks)",
    )
