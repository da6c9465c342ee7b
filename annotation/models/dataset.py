"""People and their writing: physicians, conversations, rubrics, consensus, labels, subsets."""

import uuid
from typing import ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.fields import CleanJSONField, JSONTextField

THEMES = [
    "global_health",
    "hedging",
    "communication",
    "context_seeking",
    "emergency_referrals",
    "health_data_tasks",
    "complex_responses",
]


class Axis(models.TextChoices):
    COMPLETENESS = "completeness"
    ACCURACY = "accuracy"
    CONTEXT_AWARENESS = "context_awareness"
    COMMUNICATION_QUALITY = "communication_quality"
    INSTRUCTION_FOLLOWING = "instruction_following"


class Physician(models.Model):
    """A person in the programme. Anonymized physicians from public files have no login."""

    # The columns of a bulk insert (healthbench_web.bulk.insert_rows), in the order its rows give them.
    INSERT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "code",
        "user_id",
        "anonymized_id",
        "role",
        "status",
        "specialty",
        "country",
        "languages",
        "career_stage",
        "created",
    )

    class Role(models.TextChoices):
        PHYSICIAN = "physician"
        CURATOR = "curator"
        RESEARCHER = "researcher"

    class Status(models.TextChoices):
        APPLICANT = "applicant"
        TRIAL = "trial"
        ACTIVE = "active"
        REMOVED = "removed"

    class CareerStage(models.TextChoices):
        UNSPECIFIED = "", "Unspecified"
        RESIDENT = "resident"
        EARLY = "early", "Early career (< 10 years)"
        MID = "mid", "Mid career (10–20 years)"
        SENIOR = "senior", "Senior (> 20 years)"

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="physician"
    )
    # The 64-hex id of a physician in the public meta-eval file.
    anonymized_id = models.CharField(max_length=64, null=True, blank=True, unique=True)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.PHYSICIAN)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    specialty = models.CharField(max_length=100, blank=True)
    country = models.CharField(max_length=100, blank=True)
    languages = CleanJSONField(default=list, blank=True)
    career_stage = models.CharField(max_length=16, choices=CareerStage.choices, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False) | Q(anonymized_id__isnull=False),
                name="physician_has_user_or_anonymized_id",
            ),
        ]

    def __str__(self) -> str:
        if self.user is not None:
            return self.user.get_username()
        return f"anon:{(self.anonymized_id or '')[:12]}"

    @property
    def is_external(self) -> bool:
        """Known only from an imported file: no account, so no tasks; their labels still count."""
        return self.user_id is None

    @property
    def counts(self) -> bool:
        """Whether this physician's work counts (removed physicians are kept for audit only)."""
        return self.status != self.Status.REMOVED


class ConsensusCriterion(models.Model):
    """One entry of the consensus catalogue, named by its cluster tag."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    cluster = models.CharField(max_length=200, unique=True, help_text="The full tag, e.g. cluster:hedging_...")
    text = models.TextField()
    points = models.SmallIntegerField(default=5)
    # Blank when the entry came from a meta-eval file, which names no axis, until a curator sets it.
    axis = models.CharField(max_length=32, choices=Axis.choices, blank=True)
    theme = models.CharField(max_length=32, blank=True)
    in_meta_eval = models.BooleanField(default=True)

    class Meta:
        ordering = ["cluster"]
        constraints = [
            models.CheckConstraint(
                condition=Q(points__gte=-10, points__lte=10) & ~Q(points=0),
                name="consensus_points_in_range_nonzero",
            ),
        ]

    def __str__(self) -> str:
        return self.cluster

    def tags(self) -> list[str]:
        """Tags of an attached criterion, in the order the public files use."""
        return ["level:cluster", self.cluster] + ([f"axis:{self.axis}"] if self.axis else [])


class Conversation(models.Model):
    """A HealthBench example: messages ending with a user turn, plus its example tags."""

    # The columns of a bulk insert (healthbench_web.bulk.insert_rows), in the order its rows give them.
    INSERT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "code",
        "prompt_id",
        "messages",
        "example_tags",
        "theme",
        "canary",
        "author_id",
        "created",
    )

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    prompt_id = models.CharField(max_length=100, unique=True)
    messages = JSONTextField(help_text="[{content, role}, ...] ending with a user turn")
    example_tags = CleanJSONField(default=list, blank=True)
    # Derived from example_tags (theme:...) so that lists can filter by it.
    theme = models.CharField(max_length=32, blank=True, db_index=True)
    # None when the imported row had no canary key, so export leaves it out again.
    # Free text that must survive a round trip: no length limit (see README, file formats).
    canary = models.TextField(null=True, blank=True)  # noqa: DJ001
    # A HealthBench Professional row's own fields (use_case, type, difficulty, specialty,
    # physician_response, id) and the order of its keys, so export writes the row back as it
    # came (annotation.formats.professional); None for a HealthBench row. Kept as text: key order.
    professional = JSONTextField(null=True, blank=True)
    author = models.ForeignKey(Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    # Goes up whenever one of its criteria is added, edited or deleted (annotation.rubric_versions,
    # called by every writer of criteria): a finished run's drift notice
    # (grading.drift) compares it with the version it last counted, never the run's grades.
    rubric_version = models.PositiveIntegerField(default=0, db_default=0)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.prompt_id

    @property
    def turns(self) -> int:
        return len(self.messages)

    def first_user_text(self) -> str:
        for message in self.messages:
            if message["role"] == "user":
                return message["content"]
        return ""


class Criterion(models.Model):
    """One rubric item of one conversation."""

    # The columns of a bulk insert (healthbench_web.bulk.insert_rows), in the order its rows give them.
    INSERT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "conversation_id",
        "position",
        "text",
        "points",
        "tags",
        "level",
        "axis",
        "consensus_criterion_id",
        "author_id",
        "flagged_for_review",
        "created",
        "updated",
    )

    class Level(models.TextChoices):
        EXAMPLE = "example"
        CLUSTER = "cluster"

    class Origin(models.TextChoices):
        EDITOR = "editor", "Written in the rubric editor"
        VOTES = "votes", "Attached by physicians' consensus votes"

    # No index of its own: criterion_rubric_order (conversation, position) serves these lookups.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="criteria", db_index=False)
    position = models.PositiveIntegerField(default=0)
    text = models.TextField()
    points = models.SmallIntegerField()
    # Kept verbatim, in file order, so export writes them back unchanged.
    tags = CleanJSONField(default=list)
    level = models.CharField(max_length=16, choices=Level.choices, default=Level.EXAMPLE)
    axis = models.CharField(max_length=32, choices=Axis.choices, blank=True)
    # Indexed only where set (criterion_consensus, criterion_author below): nearly every
    # criterion of an imported file has neither, and indexing their NULLs cost PostgreSQL a
    # tenth of an import's CPU (README, Benchmarks, issue 32).
    consensus_criterion = models.ForeignKey(
        ConsensusCriterion,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="attachments",
        db_index=False,
    )
    author = models.ForeignKey(
        Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="criteria", db_index=False
    )
    # How the criterion got here. Null for criteria from a HealthBench file: the bulk import
    # writes plain rows and leaves this column out, so it has to be nullable.
    origin = models.CharField(max_length=16, choices=Origin.choices, null=True, blank=True)  # noqa: DJ001
    flagged_for_review = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["conversation_id", "position", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(points__gte=-10, points__lte=10) & ~Q(points=0),
                name="criterion_points_in_range_nonzero",
            ),
            # A consensus criterion is attached to a conversation at most once, even when
            # the deciding votes arrive at the same moment.
            models.UniqueConstraint(
                fields=["conversation", "consensus_criterion"],
                condition=Q(consensus_criterion__isnull=False),
                name="one_attachment_per_consensus_criterion",
            ),
        ]
        indexes = [
            # Rubric of one conversation, in order (editor, export, grading).
            models.Index(fields=["conversation", "position"], name="criterion_rubric_order"),
            # A catalogue entry's attachments, and the PROTECT check that keeps it while it has any.
            models.Index(
                fields=["consensus_criterion"],
                condition=Q(consensus_criterion__isnull=False),
                name="criterion_consensus",
            ),
            # A physician's criteria, and the SET NULL when a physician is deleted.
            models.Index(fields=["author"], condition=Q(author__isnull=False), name="criterion_author"),
        ]

    def __str__(self) -> str:
        return f"[{self.points}] {self.text[:80]}"

    @property
    def written_by(self) -> str:
        """Who the criterion comes from: "consensus" (a catalogue entry), "physician" (written here) or "dataset"."""
        if self.level == self.Level.CLUSTER:
            return "consensus"
        if self.author_id is not None or self.origin == self.Origin.EDITOR:
            return "physician"
        return "dataset"


class ConsensusVote(models.Model):
    """A physician's vote on whether a consensus criterion applies to a conversation."""

    physician = models.ForeignKey(Physician, on_delete=models.CASCADE, related_name="votes")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="votes")
    consensus_criterion = models.ForeignKey(ConsensusCriterion, on_delete=models.CASCADE, related_name="votes")
    applies = models.BooleanField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["physician", "conversation", "consensus_criterion"], name="one_vote_per_physician_item"
            ),
        ]
        indexes = [
            # Tally of one (conversation, consensus criterion) when deciding attachment.
            models.Index(fields=["conversation", "consensus_criterion"], name="vote_tally"),
        ]

    def __str__(self) -> str:
        return f"{self.physician} {'applies' if self.applies else 'does not apply'} {self.consensus_criterion}"


class IdealResponse(models.Model):
    """A physician-written ideal response, with what the physician was shown while writing it."""

    # The columns of a bulk insert (healthbench_web.bulk.insert_rows), in the order its rows give them.
    INSERT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "code",
        "conversation_id",
        "author_id",
        "text",
        "condition",
        "group",
        "reference_responses",
        "from_dataset",
        "created",
    )

    class Condition(models.TextChoices):
        NO_REFERENCE = "no_reference", "No reference responses shown"
        WITH_REFERENCE = "with_reference", "Reference responses shown"

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="ideal_responses")
    author = models.ForeignKey(Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    text = models.TextField()
    condition = models.CharField(max_length=16, choices=Condition.choices, default=Condition.NO_REFERENCE)
    # "Group 1" (no reference), "Group 2"/"Group 3" (references from older/newer models).
    group = models.CharField(max_length=32, blank=True)
    reference_responses = JSONTextField(default=list, blank=True)
    # True for the one that came from (and is written back to) a HealthBench file.
    from_dataset = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"], condition=Q(from_dataset=True), name="one_dataset_ideal_per_conversation"
            ),
            # The editor saves over the physician's own draft instead of piling up copies.
            models.UniqueConstraint(
                fields=["conversation", "author"],
                condition=Q(from_dataset=False, author__isnull=False),
                name="one_ideal_per_author_conversation",
            ),
        ]

    def __str__(self) -> str:
        return f"ideal response for {self.conversation} ({self.group or self.condition})"


class PhysicianLabel(models.Model):
    """A physician's met / not met for one (response, criterion): meta-eval ground truth."""

    # The columns of a bulk insert (healthbench_web.bulk.insert_rows), in the order its rows give them.
    INSERT_COLUMNS: ClassVar[tuple[str, ...]] = (
        "physician_id",
        "response_id",
        "criterion_id",
        "met",
        "comment",
        "repeats",
        "created",
    )

    physician = models.ForeignKey(Physician, on_delete=models.CASCADE, related_name="labels")
    response = models.ForeignKey("grading.Response", on_delete=models.CASCADE, related_name="physician_labels")
    criterion = models.ForeignKey(Criterion, on_delete=models.CASCADE, related_name="physician_labels")
    met = models.BooleanField()
    comment = models.TextField(blank=True)
    # Further times an imported file listed this physician, with this label, on this item. The
    # product keeps one label per physician and item; the reference counts every listing as a
    # pair, so reports say how many were merged.
    repeats = models.PositiveSmallIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["physician", "response", "criterion"], name="one_label_per_physician_item"),
        ]

    def __str__(self) -> str:
        return f"{self.physician}: {'met' if self.met else 'not met'}"


class Subset(models.Model):
    """A named set of conversations: all, consensus, hard, or custom."""

    class Kind(models.TextChoices):
        ALL = "all"
        CONSENSUS = "consensus"
        HARD = "hard"
        CUSTOM = "custom"

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CUSTOM)
    description = models.TextField(blank=True)
    conversations = models.ManyToManyField(Conversation, through="SubsetMember", related_name="subsets")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def only_cluster_criteria(self) -> bool:
        """The Consensus subset is graded and exported on its cluster criteria only."""
        return self.kind == self.Kind.CONSENSUS


class SubsetMember(models.Model):
    # The columns of a bulk insert (healthbench_web.bulk.insert_rows), in the order its rows give them.
    INSERT_COLUMNS: ClassVar[tuple[str, ...]] = ("subset_id", "conversation_id", "added")

    subset = models.ForeignKey(Subset, on_delete=models.CASCADE, related_name="members")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="memberships")
    added = models.DateTimeField(auto_now_add=True)

    class Meta:
        # Export writes members in the order they joined, which is file order on import.
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["subset", "conversation"], name="one_membership_per_subset"),
        ]

    def __str__(self) -> str:
        return f"{self.subset} ∋ {self.conversation}"


class SubsetChange(models.Model):
    """One change to a subset's members, kept so that the last one can be undone until the next freeze."""

    subset = models.ForeignKey(Subset, on_delete=models.CASCADE, related_name="changes")
    # What the curator did, in words ("Build Hard from demo-run, 100 conversations").
    action = models.CharField(max_length=300)
    # Conversation ids that joined.
    added = models.JSONField(default=list)
    # [member id, conversation id] of the members that left: undo puts them back in their place.
    removed = models.JSONField(default=list)
    by = models.ForeignKey(Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    undone = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            # The latest change of one subset (the undo button and the undo itself).
            models.Index(fields=["subset", "created"], name="subset_change_latest"),
        ]

    def __str__(self) -> str:
        return f"{self.subset}: {self.action}"


class SubsetVersion(models.Model):
    """A frozen copy of a subset: its members and their rubrics, with a content hash."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    subset = models.ForeignKey(Subset, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    # [{prompt_id, rubrics: [{criterion, points, tags}]}, ...] as they were when frozen.
    snapshot = CleanJSONField()
    conversations = models.ManyToManyField(Conversation, related_name="subset_versions", blank=True)
    frozen_by = models.ForeignKey(Physician, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    frozen = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["subset", "number"]
        constraints = [
            models.UniqueConstraint(fields=["subset", "number"], name="one_version_number_per_subset"),
        ]

    def __str__(self) -> str:
        return f"{self.subset} v{self.number}"
