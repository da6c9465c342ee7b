"""What a run leaves at the provider and in the database beyond its grades: provider batches
(the Batch API) and its stored numbers."""

import uuid
from typing import ClassVar

from django.db import models

from annotation.models import Conversation
from grading.models.runs import Run, RunBatch


class ProviderBatch(models.Model):
    """One batch at the provider (OpenAI's /v1/batches), not to be confused with RunBatch, the
    work unit a task claims: a batched run's RunBatch sends its requests as one or more
    provider batches (several when they pass the provider's limits of requests or bytes per
    file), then polls them and stores their lines as grades (grading.pipeline.provider_batches).

    Every provider id is stored as soon as it is known, so a worker that dies, or a deploy,
    loses nothing: the next claim of the RunBatch goes on from here. ``requests`` maps each
    request's key (its ``custom_id``) to what its earlier answers cost and left to try
    (empty for a first answer); lines that must be asked again (an answer cut off, an
    unreadable one) go into a provider batch of the next round."""

    class Status(models.TextChoices):
        NEW = "new", "not sent yet"
        VALIDATING = "validating"
        IN_PROGRESS = "in_progress", "in progress"
        FINALIZING = "finalizing"
        COMPLETED = "completed"
        FAILED = "failed"
        EXPIRED = "expired"
        CANCELLING = "cancelling"
        CANCELLED = "cancelled"

    ENDED: ClassVar[tuple[str, ...]] = (Status.COMPLETED, Status.FAILED, Status.EXPIRED, Status.CANCELLED)

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="provider_batches")
    run_batch = models.ForeignKey(RunBatch, on_delete=models.CASCADE, related_name="provider_batches")
    round = models.PositiveSmallIntegerField(default=0)
    part = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.NEW)
    requests = models.JSONField(default=dict)
    input_file_id = models.CharField(max_length=200, blank=True)
    # When the create request went out: after a crash, the provider is asked for a batch
    # carrying this row's code before another is created.
    create_sent = models.DateTimeField(null=True, blank=True)
    batch_id = models.CharField(max_length=200, blank=True)
    output_file_id = models.CharField(max_length=200, blank=True)
    error_file_id = models.CharField(max_length=200, blank=True)
    cancel_sent = models.DateTimeField(null=True, blank=True)
    # The provider's request counts, as last polled.
    total = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    # Its lines are stored as grades (or carried into the next round).
    collected = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    polled = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run_batch", "round", "part"]
        constraints = [
            models.UniqueConstraint(fields=["run_batch", "round", "part"], name="one_provider_batch_per_part"),
        ]
        indexes = [
            # A RunBatch's claim: its provider batches not yet collected.
            models.Index(fields=["run_batch", "collected"], name="provider_batch_open"),
        ]

    def __str__(self) -> str:
        return f"{self.run} provider batch {self.batch_id or self.code} ({self.status})"


class StoredReport(models.Model):
    """A finished run's numbers, computed once and kept with it: its report (the JSON document
    and the ranking the page pages through) or a meta-eval document. Read back after a cache
    flush or a restart from any process instead of being computed again; valid while the
    run's report_version is the one it was computed at (a resume moves it on)."""

    class Kind(models.TextChoices):
        REPORT = "report"
        META_EVAL = "meta_eval"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="stored_reports")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # What else the numbers depend on: the seed, the length-adjustment constants, the labels' fingerprint.
    key = models.CharField(max_length=300)
    version = models.PositiveIntegerField()
    # zlib-compressed: JSON for a document, numpy's .npz (no pickles) for a report.
    payload = models.BinaryField()
    created = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # Also the index of the lookup: one row per run, kind and key.
            models.UniqueConstraint(fields=["run", "kind", "key"], name="one_stored_report_per_key"),
        ]

    def __str__(self) -> str:
        return f"{self.run} {self.kind} v{self.version}"


class RunRubric(models.Model):
    """A run's planned rubric on one of its conversations, and how the live rubric differs from
    it (grading.drift): what the drift notice of a finished run's page sums. ``rubric_version``
    is the conversation's Conversation.rubric_version the counts were taken at; a row whose
    conversation moved on since is counted again, alone, from ``planned``."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rubrics")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    rubric_version = models.PositiveIntegerField()
    # [[criterion id (None: deleted or edited before the run graded it), digest of (text, points,
    # tags)], ...]: the items the run graded, never the grades themselves.
    planned = models.JSONField(default=list)
    added = models.PositiveIntegerField(default=0)
    edited = models.PositiveIntegerField(default=0)
    deleted = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            # Also the index of the page's lookup: a run's rows.
            models.UniqueConstraint(fields=["run", "conversation"], name="one_run_rubric_per_conversation"),
        ]

    def __str__(self) -> str:
        return f"{self.run} on conversation {self.conversation_id}"
