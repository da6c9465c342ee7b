"""Machines and numbers: responses, grader configurations, runs and grades."""

import uuid

from django.db import models
from django.db.models import Q

from annotation.models import Conversation, Criterion, Physician, SubsetVersion


class Response(models.Model):
    """An assistant reply to a conversation: sampled, written by a physician, or imported."""

    class Source(models.TextChoices):
        SAMPLED = "sampled"
        PHYSICIAN = "physician"
        IMPORTED = "imported"

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="responses")
    text = models.TextField()
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.IMPORTED)
    model_name = models.CharField(max_length=200, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    sample_index = models.PositiveIntegerField(default=0)
    # The id a results or meta-eval file gives this completion.
    completion_id = models.CharField(max_length=100, blank=True, db_index=True)
    author = models.ForeignKey(Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.model_name or self.source} #{self.sample_index} for {self.conversation}"


class GraderConfig(models.Model):
    """How to reach and ask a grader model on an OpenAI-compatible endpoint."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=100, unique=True)
    base_url = models.URLField(blank=True, help_text="Empty for the OpenAI default")
    model = models.CharField(max_length=200)
    # The name of the environment variable that holds the key, never the key itself.
    api_key_env = models.CharField(max_length=100, default="OPENAI_API_KEY")
    temperature = models.FloatField(default=0.0)
    max_tokens = models.PositiveIntegerField(default=2048)
    timeout_seconds = models.FloatField(default=60.0)
    prompt_hash = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    """One grading pass over a set of responses."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"
        FAILED = "failed"
        IMPORTED = "imported"

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200, unique=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    subset_version = models.ForeignKey(SubsetVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    grader_config = models.ForeignKey(GraderConfig, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    policy_model = models.CharField(max_length=200, blank=True)
    samples = models.PositiveIntegerField(default=1)
    use_cache = models.BooleanField(default=True)
    source_file = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.name


class Grade(models.Model):
    """A grader's decision on one (response, criterion) in one run.

    The criterion's text, points and tags are copied in, so a later rubric edit never
    changes an old report.
    """

    class Status(models.TextChoices):
        GRADED = "graded"
        FAILED = "failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="grades")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="grades")
    criterion = models.ForeignKey(Criterion, null=True, blank=True, on_delete=models.SET_NULL, related_name="grades")
    position = models.PositiveIntegerField(default=0)
    criterion_text = models.TextField()
    points = models.SmallIntegerField()
    tags = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.GRADED)
    met = models.BooleanField(null=True)
    explanation = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    reused = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

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
            # All grades of one run, for reports.
            models.Index(fields=["run", "response"], name="grade_run_response"),
        ]

    def __str__(self) -> str:
        return f"{self.run}: {self.status} {self.met}"
