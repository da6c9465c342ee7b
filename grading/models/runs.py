"""What a run grades and holds: responses, runs, their work units (RunBatch), grades and failed
samples."""

import uuid
from typing import ClassVar

from django.db import models
from django.db.models import Q
from django.db.models.functions import Length

from annotation.fields import CleanJSONField
from annotation.models import Conversation, Criterion, Physician, Subset, SubsetVersion
from grading.models.endpoints import GraderConfig, GradingMode

# HealthBench Professional: 0.0147 off the score for every 500 characters above 2,000.
DEFAULT_LENGTH_CENTRE = 2000
DEFAULT_LENGTH_PENALTY = 0.0147


class Response(models.Model):
    """An assistant reply to a conversation: sampled, written by a physician, or imported."""

    # The columns of a bulk insert (healthbench_web.bulk.insert_rows), in the order its rows give them.
    INSERT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "code",
        "conversation_id",
        "text",
        "source",
        "model_name",
        "parameters",
        "sample_index",
        "completion_id",
        "author_id",
        "prompt_tokens",
        "completion_tokens",
        "created",
    )

    class Source(models.TextChoices):
        SAMPLED = "sampled"
        PHYSICIAN = "physician"
        IMPORTED = "imported"

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="responses")
    text = models.TextField()
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.IMPORTED)
    model_name = models.CharField(max_length=200, blank=True)
    parameters = CleanJSONField(default=dict, blank=True)
    sample_index = models.PositiveIntegerField(default=0)
    # The id a results or meta-eval file gives this completion.
    completion_id = models.CharField(max_length=100, blank=True, db_index=True)
    author = models.ForeignKey(Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The run that sampled it from a policy model; deleting that run keeps the response.
    run = models.ForeignKey("Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="sampled_responses")
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Of the prompt tokens, those the provider's prompt cache served; of the completion
    # tokens, those spent reasoning (both as the provider reports them; NULL when it did not).
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Of the prompt tokens, those written to the provider's prompt cache (where it says so).
    cache_write_tokens = models.PositiveIntegerField(null=True, blank=True)
    # A sampled model that refused: the text is its refusal, what a user would have read.
    refused = models.BooleanField(default=False, db_default=False)
    # Cut off at the output limit (output_limit tokens): the text is what came before.
    truncated = models.BooleanField(default=False, db_default=False)
    output_limit = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    # The text's length in characters, kept by the database: a report needs every response's
    # length (the length adjustment, the length-score correlation), and measuring 80,000 texts
    # at each progress step costs more than reading all their other columns.
    text_length = models.GeneratedField(
        expression=Length("text"), output_field=models.PositiveIntegerField(), db_persist=True
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            # Two workers sampling the same batch (a redelivered task) store each sample once.
            models.UniqueConstraint(
                fields=["run", "conversation", "sample_index"],
                condition=Q(run__isnull=False),
                name="one_sample_per_run_index",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_name or self.source} #{self.sample_index} for {self.conversation}"


class Run(models.Model):
    """One grading pass over a set of responses."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"
        FAILED = "failed"
        IMPORTED = "imported"

    class Plan(models.TextChoices):
        """What the run set out to grade, fixed when it is stored: its numbers are computed
        from the plan and its grades only, so no later rubric or subset edit changes them."""

        SUBSET_VERSION = "subset_version", "the rubrics of a frozen subset version"
        SOURCE_RUN = "source_run", "the items the source run graded"
        RUBRIC_CHANGES = "rubric_changes", "the criteria added or edited since the source run"
        # Every (response, consensus criterion) physicians labelled at launch (Run.plan_rubric).
        LABELLED = "labelled", "the physician-labelled items"
        # An imported file's items; also a run recorded before runs had plans (migration 0012).
        STORED = "stored", "its stored grades"

    class PromptFilling(models.TextChoices):
        """How the grader template's placeholders are filled (grading.pipeline.batch_requests)."""

        # As simple-evals fills them: the conversation as the policy got it, its system message
        # first; a labelled item's bare rubric text, as healthbench_meta_eval.py sends it.
        REFERENCE = "reference", "as simple-evals fills it"
        # Runs launched before: the dataset conversation alone, every item as "[points] text".
        EARLIER = "earlier", "without the policy's system message, every rubric item as [points] text"

    class Bootstrap(models.TextChoices):
        ONE_DRAW = "one-draw", "n of n with replacement, as the reference draws, from one draw per resample"
        MULTINOMIAL = "multinomial", "n of n with replacement, as the reference draws"
        SHARED = "shared", "Poisson weights shared by every metric"
        PER_METRIC = "per-metric", "one resampling per metric"

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200, unique=True)
    # No default: a run stored without a plan breaks the run_has_plan constraint.
    plan = models.CharField(max_length=16, choices=Plan.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    subset_version = models.ForeignKey(
        SubsetVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    grader_config = models.ForeignKey(
        GraderConfig, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    policy_model = models.CharField(max_length=200, blank=True)
    samples = models.PositiveIntegerField(default=1)
    use_cache = models.BooleanField(default=True)
    source_file = models.CharField(max_length=500, blank=True)
    # What is graded: the responses (and criteria) another run graded, or responses
    # sampled from a policy model for the conversations of a subset.
    responses_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="regrades")
    # For Plan.LABELLED: {response id: [[criterion id, text, points, tags], ...]}.
    # For Plan.RUBRIC_CHANGES: {conversation id: [[criterion id, text, points, tags], ...]},
    # the criteria each of the source run's responses is graded on, frozen at launch.
    plan_rubric = CleanJSONField(null=True, blank=True)
    subset = models.ForeignKey(Subset, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    policy_config = models.ForeignKey(
        GraderConfig, null=True, blank=True, on_delete=models.PROTECT, related_name="policy_runs"
    )
    # Graded through the provider's Batch API (grading.pipeline.provider_batches), at its prices.
    batch = models.BooleanField(default=False, db_default=False)
    # Its responses are the physicians' (each HealthBench Professional row's physician_response,
    # grading.pipeline.physician_responses) on the subset's frozen version; policy_model says
    # "physician", so reports list the physician baseline beside the models.
    physician_responses = models.BooleanField(default=False, db_default=False)
    # Grader calls in flight at once for this run, across all workers.
    concurrency = models.PositiveIntegerField(default=16)
    # Scoring options, not grading ones: they change the report, never a grade. HealthBench
    # Professional always scores with the length adjustment; any other run may opt in. The
    # constants live on the run so that a report can say which ones it used.
    healthbench_professional = models.BooleanField(default=False)
    length_adjusted = models.BooleanField(default=False)
    length_centre = models.PositiveIntegerField(default=DEFAULT_LENGTH_CENTRE)
    length_penalty = models.FloatField(default=DEFAULT_LENGTH_PENALTY)
    # How the report draws its bootstrap stds (grading.reports.scoring): a run's numbers never
    # change, so the runs recorded before the shared resampling keep one resampling per metric,
    # and those recorded with the Poisson-weighted one keep it; so do those recorded with a
    # multinomial draw per set of examples (issue 27), whose draws the one draw does not repeat.
    bootstrap = models.CharField(
        max_length=16, choices=Bootstrap.choices, default=Bootstrap.ONE_DRAW, db_default=Bootstrap.PER_METRIC
    )
    # Fixed at launch, so a run resumed after an upgrade sends the prompts it started with.
    prompt_filling = models.CharField(
        max_length=16, choices=PromptFilling.choices, default=PromptFilling.REFERENCE, db_default=PromptFilling.EARLIER
    )
    # Grades the run will hold when complete (graded or failed).
    total_items = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    # Goes up at each progress step of the run (a share of its batches done, its end, a resume):
    # cached reports are keyed by it, so each step's report is computed once, on every process.
    report_version = models.PositiveIntegerField(default=0)
    # The drift notice's baseline (grading.drift): {"version": the report_version its planned
    # rubric was read at, "cluster": whether only cluster criteria count}, its rows in RunRubric;
    # None until first needed (a run recorded before it, or one not ended yet).
    drift_baseline = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.CheckConstraint(condition=Q(concurrency__gte=1), name="run_concurrency_positive"),
            models.CheckConstraint(condition=Q(length_penalty__gte=0), name="run_length_penalty_not_negative"),
            # Every run names what it grades, and only what that plan needs.
            models.CheckConstraint(
                condition=Q(plan="subset_version", subset_version__isnull=False, responses_from__isnull=True)
                | Q(plan="source_run", responses_from__isnull=False, subset_version__isnull=True)
                | Q(
                    plan="rubric_changes",
                    responses_from__isnull=False,
                    subset_version__isnull=True,
                    plan_rubric__isnull=False,
                )
                | Q(
                    plan="labelled", responses_from__isnull=True, subset_version__isnull=True, plan_rubric__isnull=False
                )
                | Q(plan="stored", responses_from__isnull=True, subset_version__isnull=True),
                name="run_has_plan",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)

    @property
    def scores_length_adjusted(self) -> bool:
        return self.length_adjusted or self.healthbench_professional


class RunBatch(models.Model):
    """A slice of a run's work that one task does: grade some responses, or first sample
    responses for some conversations and then grade them.

    A task claims its batch with a conditional update and holds it under a lease that it
    renews while it works; a batch whose lease ran out (its worker died) is queued again.
    ``claims`` counts the claims and fences a worker that lost its lease.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"
        FAILED = "failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="batches")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    response_ids = models.JSONField(default=list, blank=True)
    conversation_ids = models.JSONField(default=list, blank=True)
    items = models.PositiveIntegerField(help_text="Grades this batch adds when complete")
    claims = models.PositiveIntegerField(default=0)
    # Claims that ended without finishing: the worker died, or the task failed.
    failures = models.PositiveSmallIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    # Last claim, renewal or end: a run whose batches were all untouched for long is stalled.
    touched = models.DateTimeField()
    failed_samples = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    # A batched run's work unit graded by live calls all the same: its failed or expired
    # provider-batch lines, retried live as the researcher chose.
    live = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="one_batch_number_per_run"),
            models.CheckConstraint(
                condition=~Q(status="running") | Q(lease_until__isnull=False), name="running_batch_has_lease"
            ),
        ]
        indexes = [
            # The sweeper: running batches whose lease ran out.
            models.Index(fields=["status", "lease_until"], name="batch_status_lease"),
        ]

    def __str__(self) -> str:
        return f"{self.run} batch {self.number} ({self.status})"


class TagsKey(models.Func):
    """A 64-bit hash of a grade's tag list, kept by PostgreSQL: a report groups a run's grades by
    their tag list (a run has a few dozen), and hashing the JSON of a million grades at each
    progress step cost the database more than reading all their other columns. Two different
    lists of one run would have to share a 64-bit hash to be confused (odds of about 1e-16 at
    40 lists). SQLite reads its reports a row at a time and keeps the text's length instead."""

    function = "jsonb_hash_extended"
    template = "%(function)s(%(expressions)s, 0)"
    output_field = models.BigIntegerField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="length(%(expressions)s)", **extra_context)


class Grade(models.Model):
    """A grader's decision on one (response, criterion) in one run.

    The criterion's text, points and tags are copied in, so a later rubric edit never
    changes an old report.
    """

    # The columns of a bulk insert (healthbench_web.bulk.insert_rows), in the order its rows give them.
    INSERT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "run_id",
        "response_id",
        "criterion_id",
        "position",
        "criterion_text",
        "points",
        "tags",
        "status",
        "met",
        "explanation",
        "raw_output",
        "error",
        "attempts",
        "prompt_tokens",
        "completion_tokens",
        "reused",
        "created",
    )

    class Status(models.TextChoices):
        GRADED = "graded"
        FAILED = "failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="grades")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="grades")
    criterion = models.ForeignKey(Criterion, null=True, blank=True, on_delete=models.SET_NULL, related_name="grades")
    position = models.PositiveIntegerField(default=0)
    criterion_text = models.TextField()
    points = models.SmallIntegerField()
    tags = CleanJSONField(default=list)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.GRADED)
    met = models.BooleanField(null=True)
    explanation = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_write_tokens = models.PositiveIntegerField(null=True, blank=True)
    reused = models.BooleanField(default=False)
    # How this grade was asked: per-criterion or per-response. In a per-response run, a
    # per-criterion grade is a fallback (its entry in the response's answer was unusable).
    # Empty for grades that came from elsewhere (imported).
    mode = models.CharField(max_length=16, choices=GradingMode.choices, blank=True, default="", db_default="")
    # Answered through the provider's Batch API: its tokens cost the batch prices.
    batched = models.BooleanField(default=False, db_default=False)
    # sha256 of the grader request (grader, prompt, conversation, response, criterion): an
    # identical request reuses a stored grade instead of calling the API. NULL for grades
    # that came from elsewhere (imported), which no request of ours can match.
    request_key = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL: no request of ours
    created = models.DateTimeField(auto_now_add=True)
    tags_key = models.GeneratedField(expression=TagsKey("tags"), output_field=models.BigIntegerField(), db_persist=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "response", "criterion"],
                condition=Q(criterion__isnull=False),
                name="one_grade_per_run_item",
            ),
            models.UniqueConstraint(fields=["run", "response", "position"], name="one_grade_per_run_position"),
            # A failed grade is missing, never "not met".
            models.CheckConstraint(
                condition=Q(status="graded", met__isnull=False) | Q(status="failed", met__isnull=True),
                name="grade_met_iff_graded",
            ),
        ]
        indexes = [
            # All grades of one run, for reports: with the columns a report reads, so that
            # PostgreSQL reads them from the index alone, not from rows that carry the
            # criterion's text and the grader's explanation (SQLite ignores `include`).
            models.Index(
                fields=["run", "response"],
                include=["id", "points", "met", "reused", "tags_key"],
                name="grade_run_response_report",
            ),
            # The grade cache: a stored grade of an identical request.
            models.Index(fields=["request_key"], name="grade_request_key"),
        ]

    def __str__(self) -> str:
        return f"{self.run}: {self.status} {self.met}"


class SampleFailure(models.Model):
    """A policy-model sample that could not be drawn, with why: the conversation's grades for
    that sample are missing from the run (never "not met"), and the reason is kept here."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="sample_failures")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    sample_index = models.PositiveIntegerField()
    error = models.TextField()
    attempts = models.PositiveSmallIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # A redelivered batch records a failed sample once.
            models.UniqueConstraint(fields=["run", "conversation", "sample_index"], name="one_failure_per_sample"),
        ]

    def __str__(self) -> str:
        return f"{self.run}: sample {self.sample_index} of {self.conversation} failed"
