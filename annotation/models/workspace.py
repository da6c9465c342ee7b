"""The physician workspace: tasks given to physicians, and the audit of every rubric edit.

Defined here and re-exported by annotation/models/__init__.py, so they belong to the
annotation app like its other models.
"""

import uuid

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.fields import CleanJSONField
from annotation.models.dataset import Conversation, Criterion, IdealResponse, Physician


class CriterionEdit(models.Model):
    """One change to a rubric in the editor: who, when, and the criterion before and after."""

    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        DELETE = "delete"

    # Kept when the criterion is deleted: the audit outlives what it describes.
    criterion = models.ForeignKey(Criterion, null=True, blank=True, on_delete=models.SET_NULL, related_name="edits")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="criterion_edits")
    physician = models.ForeignKey(Physician, on_delete=models.PROTECT, related_name="criterion_edits")
    action = models.CharField(max_length=16, choices=Action.choices)
    # {text, points, axis} as they were; null before a create and after a delete.
    before = CleanJSONField(null=True, blank=True)
    after = CleanJSONField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(action="create", before__isnull=True, after__isnull=False)
                    | Q(action="update", before__isnull=False, after__isnull=False)
                    | Q(action="delete", before__isnull=False, after__isnull=True)
                ),
                name="criterion_edit_before_after_match_action",
            ),
        ]
        indexes = [
            # History of one conversation's rubric, newest last (audit page, admin).
            models.Index(fields=["conversation", "created"], name="criterion_edit_history"),
        ]

    def __str__(self) -> str:
        return f"{self.physician} {self.action} criterion {self.criterion_id} of {self.conversation}"


class Assignment(models.Model):
    """One task given to a physician: write a rubric or an ideal response, vote, or label."""

    class Kind(models.TextChoices):
        RUBRIC = "rubric", "Write rubric"
        IDEAL_RESPONSE = "ideal_response", "Write ideal response"
        CONSENSUS_VOTE = "consensus_vote", "Vote on consensus criteria"
        LABEL = "label", "Label responses"

    class Status(models.TextChoices):
        OPEN = "open"
        DONE = "done"
        # Taken back from a removed physician; kept for audit, never counted.
        CANCELLED = "cancelled"
        # Became impossible after it was given out (its physician now writes the rubric it
        # would label); off the physician's list, kept with a note for the curator.
        WITHDRAWN = "withdrawn"

    # Statuses that no longer count as work given out: off every list and every count.
    INACTIVE = ("cancelled", "withdrawn")

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    physician = models.ForeignKey(Physician, on_delete=models.CASCADE, related_name="assignments")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="assignments")
    # A labeling task names one (response, criterion) item; other kinds leave both empty.
    response = models.ForeignKey(
        "grading.Response", null=True, blank=True, on_delete=models.CASCADE, related_name="assignments"
    )
    criterion = models.ForeignKey(
        Criterion, null=True, blank=True, on_delete=models.CASCADE, related_name="assignments"
    )
    # Ideal-response tasks: what the physician is shown beside the editor.
    condition = models.CharField(max_length=16, choices=IdealResponse.Condition.choices, blank=True)
    reference_responses = models.ManyToManyField("grading.Response", blank=True, related_name="+")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    assigned_by = models.ForeignKey(Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Why a task was withdrawn, for the curator.
    note = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    completed = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["physician", "kind", "conversation"],
                condition=~Q(kind="label"),
                name="one_assignment_per_physician_kind_conversation",
            ),
            models.UniqueConstraint(
                fields=["physician", "response", "criterion"],
                condition=Q(kind="label"),
                name="one_label_assignment_per_physician_item",
            ),
            models.CheckConstraint(
                condition=(
                    Q(kind="label", response__isnull=False, criterion__isnull=False)
                    | (~Q(kind="label") & Q(response__isnull=True, criterion__isnull=True))
                ),
                name="assignment_label_names_its_item",
            ),
            models.CheckConstraint(
                condition=Q(status="done", completed__isnull=False) | ~Q(status="done"),
                name="assignment_done_has_completed",
            ),
        ]
        indexes = [
            # A physician's task list and counts by kind (home page), and "next open item" (labeling).
            models.Index(fields=["physician", "kind", "status"], name="assignment_task_list"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.conversation} for {self.physician} ({self.status})"

    @property
    def is_done(self) -> bool:
        return self.status == self.Status.DONE

    @property
    def is_open(self) -> bool:
        return self.status == self.Status.OPEN


class TaskEvent(models.Model):
    """A moment its physician was at work on a task, recorded by the server: the task's page
    opened (a GET, the one write a task page makes on opening), a draft saved as they type, an
    answer sent. A task's active time is the sum of the gaps between its events, each gap
    longer than ``TIME_ON_TASK_IDLE_SECONDS`` cut out (grading/physicians/quality.py).
    Append-only; deleted with the task."""

    class Kind(models.TextChoices):
        OPEN = "open"
        DRAFT = "draft"
        ANSWER = "answer"

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    at = models.DateTimeField(default=timezone.now)
    # A rubric's submit: how many sign warnings the physician saw and submitted anyway.
    sign_warnings = models.PositiveSmallIntegerField(default=0)

    class Meta:
        indexes = [
            # One task's timeline, in order (the physician page reads all of a physician's).
            models.Index(fields=["assignment", "at"], name="task_event_timeline"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of task {self.assignment_id} at {self.at:%Y-%m-%d %H:%M:%S}"


class Draft(models.Model):
    """Text a physician is writing and has not yet submitted, kept on the server as they type.

    One per physician and field: `key` names the field ("ideal:<conversation code>",
    "criterion:<conversation code>:new", "label-comment:<task code>"), so a draft comes back on
    any device and after a new login. Submitting the text deletes its draft.
    """

    physician = models.ForeignKey(Physician, on_delete=models.CASCADE, related_name="drafts")
    key = models.CharField(max_length=120)
    text = models.TextField(blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["physician", "key"], name="one_draft_per_physician_field"),
        ]

    def __str__(self) -> str:
        return f"draft {self.key} of {self.physician}"


class CantJudge(models.Model):
    """A physician's "I can't judge this" on a labeling or voting item, with the reason.

    Stored beside labels and votes but never one of them: it stays out of the agreement
    metrics and the consensus count, and is listed for the curator beside the item.
    """

    class Reason(models.TextChoices):
        EXPERTISE = "expertise", "Outside my expertise"
        CUT_OFF = "cut_off", "The response is cut off or empty"
        UNCLEAR = "unclear", "The criterion is unclear"
        OTHER = "other", "Other"

    physician = models.ForeignKey(Physician, on_delete=models.CASCADE, related_name="cant_judge")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="cant_judge")
    # A labeling item names (response, criterion); a voting item names its consensus criterion.
    response = models.ForeignKey(
        "grading.Response", null=True, blank=True, on_delete=models.CASCADE, related_name="cant_judge"
    )
    criterion = models.ForeignKey(Criterion, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    consensus_criterion = models.ForeignKey(
        "annotation.ConsensusCriterion", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    reason = models.CharField(max_length=16, choices=Reason.choices)
    note = models.TextField(blank=True)
    created = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["physician", "response", "criterion"],
                condition=Q(consensus_criterion__isnull=True),
                name="one_cant_judge_per_label_item",
            ),
            models.UniqueConstraint(
                fields=["physician", "conversation", "consensus_criterion"],
                condition=Q(consensus_criterion__isnull=False),
                name="one_cant_judge_per_vote_item",
            ),
            models.CheckConstraint(
                condition=(
                    Q(response__isnull=False, criterion__isnull=False, consensus_criterion__isnull=True)
                    | Q(response__isnull=True, criterion__isnull=True, consensus_criterion__isnull=False)
                ),
                name="cant_judge_names_one_item",
            ),
        ]
        indexes = [
            # The curator's list beside a conversation's items (conversation page, consensus tally).
            models.Index(fields=["conversation"], name="cant_judge_by_conversation"),
        ]

    def __str__(self) -> str:
        return f"{self.physician} can't judge ({self.reason}) on {self.conversation}"

    @property
    def is_vote(self) -> bool:
        return self.consensus_criterion_id is not None


class Guideline(models.Model):
    """What a physician should know before a kind of task, written by curators in Markdown."""

    kind = models.CharField(max_length=16, choices=Assignment.Kind.choices, unique=True)
    text = models.TextField(blank=True)
    updated_by = models.ForeignKey(Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"guidelines for {self.get_kind_display()}"


class GuidelineRead(models.Model):
    """A physician has seen the guidelines of a kind of task: they are no longer opened for them."""

    physician = models.ForeignKey(Physician, on_delete=models.CASCADE, related_name="guidelines_read")
    kind = models.CharField(max_length=16, choices=Assignment.Kind.choices)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["physician", "kind"], name="one_guideline_read_per_physician_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.physician} read the {self.kind} guidelines"


class GoldItem(models.Model):
    """An item with a known answer, marked by a curator: a labeling item (response, criterion)
    or a voting item (conversation, consensus criterion). Physicians on trial are given some
    among their tasks (annotation/services/gold.py); nothing on a task page says which, and the
    answer and rationale are shown to a physician only once they have answered."""

    # A short rationale: read by the physician right after their answer.
    RATIONALE_MAX = 1000

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="gold_items")
    response = models.ForeignKey(
        "grading.Response", null=True, blank=True, on_delete=models.CASCADE, related_name="gold_items"
    )
    criterion = models.ForeignKey(Criterion, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    consensus_criterion = models.ForeignKey(
        "annotation.ConsensusCriterion", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # Met (labeling item) or applies (voting item).
    answer = models.BooleanField()
    rationale = models.CharField(max_length=RATIONALE_MAX)
    created_by = models.ForeignKey(Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["response", "criterion"],
                condition=Q(consensus_criterion__isnull=True),
                name="one_gold_per_label_item",
                violation_error_message="This labeling item is already gold.",
            ),
            models.UniqueConstraint(
                fields=["conversation", "consensus_criterion"],
                condition=Q(consensus_criterion__isnull=False),
                name="one_gold_per_vote_item",
                violation_error_message="This voting item is already gold.",
            ),
            models.CheckConstraint(
                condition=(
                    Q(response__isnull=False, criterion__isnull=False, consensus_criterion__isnull=True)
                    | Q(response__isnull=True, criterion__isnull=True, consensus_criterion__isnull=False)
                ),
                name="gold_names_one_item",
                violation_error_message="Name a labeling item or a voting item, not both.",
            ),
        ]

    def __str__(self) -> str:
        return f"gold {'vote' if self.is_vote else 'label'} item on {self.conversation}"

    @property
    def is_vote(self) -> bool:
        return self.consensus_criterion_id is not None

    @property
    def answer_text(self) -> str:
        if self.is_vote:
            return "applies" if self.answer else "does not apply"
        return "met" if self.answer else "not met"

    def clean(self) -> None:
        """What a physician could be asked: a model response and a consensus criterion attached
        to this conversation (what labeling tasks name), or a catalogue entry of its theme (what
        its ballot lists). Checked here so that the curator's page and the admin refuse alike."""
        errors: dict[str, str] = {}
        self.rationale = (self.rationale or "").strip()
        if not self.rationale:
            errors["rationale"] = (
                "Say in a sentence or two why this is the answer: the physician reads it after answering."
            )
        conversation_id = self.conversation_id
        response = self.response if self.response_id is not None else None
        criterion = self.criterion if self.criterion_id is not None else None
        if response is not None and response.conversation_id != conversation_id:
            errors["response"] = "This response answers another conversation."
        elif response is not None and response.source == "physician":
            errors["response"] = "Physicians label model responses, not physicians' ideal responses."
        if criterion is not None and (
            criterion.conversation_id != conversation_id or criterion.level != Criterion.Level.CLUSTER
        ):
            errors["criterion"] = (
                "Choose a consensus criterion attached to this conversation: physicians label only those."
            )
        entry = self.consensus_criterion if self.consensus_criterion_id is not None else None
        if entry is not None and conversation_id is not None and entry.theme != self.conversation.theme:
            errors["consensus_criterion"] = "Not on this conversation's ballot: it belongs to another theme."
        if self.consensus_criterion_id is None and (self.response_id is None) != (self.criterion_id is None):
            errors["response" if self.response_id is None else "criterion"] = (
                "A labeling item needs both a response and a criterion."
            )
        if errors:
            raise ValidationError(errors)


class GoldAnswer(models.Model):
    """A physician's first answer on a gold item: what their gold accuracy counts. Labels and
    votes can be changed afterwards (the physician has then seen the known answer), so the
    answer given blind is kept here and never updated."""

    gold = models.ForeignKey(GoldItem, on_delete=models.CASCADE, related_name="answers")
    physician = models.ForeignKey(Physician, on_delete=models.CASCADE, related_name="gold_answers")
    answer = models.BooleanField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["gold", "physician"], name="one_gold_answer_per_physician"),
        ]

    def __str__(self) -> str:
        return f"{self.physician} on {self.gold}"


class PhysicianQualityStore(models.Model):
    """The physician quality figures last computed in the background, and whether newer work
    waits to be counted: one row (id 1).

    The services that save what the figures count (answers, events of done tasks, removals)
    set ``requested_at`` (the first change not yet counted) and ``queued_at`` (a refresh task
    queued; annotation/services/quality_refresh.py). The refresh task clears both, then reads
    and stores the figures under the fingerprint of what it read (grading/physicians/stored.py);
    the pages serve them, saying when newer answers are being counted."""

    fingerprint = models.CharField(max_length=64, blank=True, db_default="")
    # The shape of the stored figures (grading/physicians/selectors.py, PROGRAMME_VERSION).
    version = models.PositiveIntegerField(db_default=0)
    counted_at = models.DateTimeField(null=True, blank=True)
    # The figures and the arrays behind them, as one .npz (numbers stored as they are, to the bit).
    figures = models.BinaryField(null=True, blank=True)
    requested_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="physician_quality_store_one_row")]

    def __str__(self) -> str:
        return f"physician quality figures counted at {self.counted_at}"
