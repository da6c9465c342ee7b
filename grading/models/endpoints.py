"""How graders and policy models are called: endpoints (curated, live), the snapshot a run
takes of one (GraderConfig), and named grader prompt templates."""

import uuid

from django.db import models
from django.db.models import Q


class ApiStyle(models.TextChoices):
    CHAT = "chat", "Chat Completions"
    RESPONSES = "responses", "Responses"


class Provider(models.TextChoices):
    """How calls reach the endpoint (grading.endpoint_access)."""

    OPENAI = "openai", "OpenAI-compatible"
    AZURE = "azure", "Azure OpenAI"


class GradingMode(models.TextChoices):
    """The grading modes the database accepts, with their labels: one per module of
    grading.pipeline.modes, whose table MODES holds them (tests/test_grading_mode_registry.py
    keeps the two equal; a new choice here makes the migration a new mode needs)."""

    PER_CRITERION = "per-criterion", "per criterion (one call per response and criterion)"
    PER_RESPONSE = "per-response", "per response (all criteria of a response in one call)"


class ExplanationLength(models.TextChoices):
    """What each per-response verdict explains itself in (the keys of response_prompt.EXPLANATIONS)."""

    WORDS = "words", "a few words"
    SENTENCE = "sentence", "one sentence"
    SENTENCES = "sentences", "two or three sentences"


class ReasoningEffort(models.TextChoices):
    """The values of the OpenAI API's ReasoningEffort (openapi.yaml 2.3.0), or none sent."""

    NOT_SENT = "", "not sent (the model's default)"
    NONE = "none", "none (no reasoning)"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"
    MAX = "max"


def _price_field(label: str) -> models.DecimalField:
    return models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True, help_text=f"US dollars per million {label}"
    )


def _discount_field() -> models.DecimalField:
    return models.DecimalField(
        max_digits=4,
        decimal_places=3,
        null=True,
        blank=True,
        help_text="Share off every price through the Batch API (OpenAI: 0.5); empty: no Batch API",
    )


_DISCOUNT_RANGE = Q(batch_discount__isnull=True) | Q(batch_discount__gte=0, batch_discount__lte=1)


class Endpoint(models.Model):
    """A named model at a provider, owned by curators. Researchers choose one by name; they
    never type a URL or a variable name (see grading.endpoint_rules for what is allowed)."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=100)
    base_url = models.URLField(blank=True, help_text="Empty for OpenAI (https://api.openai.com/v1)")
    api_style = models.CharField(max_length=16, choices=ApiStyle.choices, default=ApiStyle.CHAT)
    model = models.CharField(max_length=200)
    # The name of the environment variable that holds the key (from ENDPOINT_KEY_VARIABLES),
    # never the key itself; empty for a server that wants none.
    key_variable = models.CharField(max_length=100, blank=True, default="OPENAI_API_KEY")
    # Reasoning models (o-series, GPT-5) reject temperature and max_tokens: they get
    # max_completion_tokens (max_output_tokens on Responses) and reasoning_effort instead.
    reasoning = models.BooleanField(default=False, help_text="A reasoning model: no temperature")
    reasoning_effort = models.CharField(max_length=8, choices=ReasoningEffort.choices, blank=True, default="")
    temperature = models.FloatField(null=True, blank=True, default=0.0, help_text="Empty to leave it to the model")
    # Empty: no output limit is sent (the model's own applies), as the reference sends none to
    # a reasoning grader.
    max_output_tokens = models.PositiveIntegerField(
        null=True, blank=True, default=2048, help_text="Empty to send no output limit"
    )
    # Sent before the conversation as a system message (a developer message on Responses),
    # as the reference's samplers do; empty: none.
    system_message = models.TextField(blank=True, default="")
    structured_output = models.BooleanField(
        default=False, help_text="The endpoint honours a strict JSON schema for the grader's answer"
    )
    # Off, a grader's answer is read as simple-evals reads it (the reference presets); on, also
    # with text around it, in any fence, or the last of several objects.
    lenient_answers = models.BooleanField(
        default=True,
        db_default=True,
        help_text="Read the grader's answer leniently (text around the JSON, any fence); off: as the reference "
        "reads it, asking again otherwise",
    )
    timeout_seconds = models.FloatField(default=60.0)
    price_input = _price_field("input tokens")
    price_cached_input = _price_field("cached input tokens (empty: the input price)")
    price_output = _price_field("output tokens (reasoning tokens included)")
    batch_discount = _discount_field()
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True, help_text="Empty for no limit")
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True, help_text="Empty for no limit")
    max_concurrency = models.PositiveIntegerField(
        null=True, blank=True, help_text="Calls in flight at once per run; empty for no limit"
    )
    # How a call reaches it (grading.endpoint_access). Azure OpenAI's classic API (deployment
    # URLs): its api-version; empty, the v1 API. key_header: the header carrying the key (empty:
    # the provider's own; "Authorization": a bearer token, such as an Entra ID token on Azure;
    # another name: a gateway's, the key sent as it is). A gateway's extra headers and query
    # parameters: {name: value}, a secret as env:VARIABLE.
    provider = models.CharField(max_length=16, choices=Provider.choices, default=Provider.OPENAI, db_default="openai")
    api_version = models.CharField(max_length=32, blank=True, default="", db_default="")
    key_header = models.CharField(max_length=64, blank=True, default="", db_default="")
    extra_headers = models.JSONField(default=dict, blank=True, db_default={})
    extra_query = models.JSONField(default=dict, blank=True, db_default={})
    notes = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["name"], name="endpoint_name_unique"),
            models.CheckConstraint(condition=Q(timeout_seconds__gt=0), name="endpoint_timeout_positive"),
            models.CheckConstraint(
                condition=Q(reasoning=False) | Q(temperature__isnull=True), name="endpoint_reasoning_no_temperature"
            ),
            models.CheckConstraint(
                condition=Q(reasoning=True) | Q(reasoning_effort=""), name="endpoint_effort_only_reasoning"
            ),
            models.CheckConstraint(
                condition=Q(temperature__isnull=True) | Q(temperature__gte=0, temperature__lte=2),
                name="endpoint_temperature_range",
            ),
            models.CheckConstraint(
                condition=(Q(price_input__isnull=True) | Q(price_input__gte=0))
                & (Q(price_cached_input__isnull=True) | Q(price_cached_input__gte=0))
                & (Q(price_output__isnull=True) | Q(price_output__gte=0)),
                name="endpoint_prices_not_negative",
            ),
            models.CheckConstraint(condition=_DISCOUNT_RANGE, name="endpoint_batch_discount_range"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def has_prices(self) -> bool:
        return self.price_input is not None and self.price_output is not None


class GraderConfig(models.Model):
    """The frozen snapshot of an endpoint's settings that a run called (a grader, with its
    prompt template, or the policy model it sampled, without). Created once per distinct set
    of settings (the name holds their hash) and never edited, so a later edit of the
    endpoint never changes an old run's record."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=100, unique=True)
    # The endpoint it was taken from; kept when the endpoint is deleted.
    endpoint = models.ForeignKey(Endpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="snapshots")
    endpoint_name = models.CharField(max_length=100, blank=True)
    base_url = models.URLField(blank=True, help_text="Empty for the OpenAI default")
    api_style = models.CharField(max_length=16, choices=ApiStyle.choices, default=ApiStyle.CHAT)
    model = models.CharField(max_length=200)
    # The name of the environment variable that holds the key, never the key itself.
    api_key_env = models.CharField(max_length=100, default="OPENAI_API_KEY")
    reasoning = models.BooleanField(default=False)
    reasoning_effort = models.CharField(max_length=8, choices=ReasoningEffort.choices, blank=True, default="")
    temperature = models.FloatField(null=True, blank=True, default=0.0)
    max_tokens = models.PositiveIntegerField(null=True, blank=True, default=2048)
    system_message = models.TextField(blank=True, default="")
    structured_output = models.BooleanField(default=False)
    lenient_answers = models.BooleanField(default=True, db_default=True)
    timeout_seconds = models.FloatField(default=60.0)
    price_input = _price_field("input tokens")
    price_cached_input = _price_field("cached input tokens")
    price_output = _price_field("output tokens")
    batch_discount = _discount_field()
    # Limits of the endpoint, kept by all workers together (when Redis is configured).
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True, help_text="Empty for no limit")
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True, help_text="Empty for no limit")
    # How a call reaches it (grading.endpoint_access). Azure OpenAI's classic API (deployment
    # URLs): its api-version; empty, the v1 API. key_header: the header carrying the key (empty:
    # the provider's own; "Authorization": a bearer token, such as an Entra ID token on Azure;
    # another name: a gateway's, the key sent as it is). A gateway's extra headers and query
    # parameters: {name: value}, a secret as env:VARIABLE.
    provider = models.CharField(max_length=16, choices=Provider.choices, default=Provider.OPENAI, db_default="openai")
    api_version = models.CharField(max_length=32, blank=True, default="", db_default="")
    key_header = models.CharField(max_length=64, blank=True, default="", db_default="")
    extra_headers = models.JSONField(default=dict, blank=True, db_default={})
    extra_query = models.JSONField(default=dict, blank=True, db_default={})
    # The grader prompt with <<conversation>> and <<rubric_item>>; prompt_hash is its sha256.
    prompt_template = models.TextField(blank=True)
    prompt_hash = models.CharField(max_length=64, blank=True)
    # The grading mode. Per response: the prompt of the criteria of one response (its template
    # and sha256), how long each explanation is, and the most criteria per call; the
    # per-criterion template above then grades the criteria whose entry was unusable.
    grading_mode = models.CharField(
        max_length=16, choices=GradingMode.choices, default=GradingMode.PER_CRITERION, db_default="per-criterion"
    )
    explanation_length = models.CharField(max_length=16, choices=ExplanationLength.choices, blank=True, default="")
    criteria_per_call = models.PositiveSmallIntegerField(null=True, blank=True)
    response_template = models.TextField(blank=True)
    response_prompt_hash = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(timeout_seconds__gt=0), name="grader_timeout_positive"),
            models.CheckConstraint(
                condition=Q(grading_mode="per-criterion") | Q(criteria_per_call__gte=1),
                name="grader_per_response_has_chunk_limit",
            ),
            models.CheckConstraint(condition=_DISCOUNT_RANGE, name="grader_batch_discount_range"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def has_prices(self) -> bool:
        return self.price_input is not None and self.price_output is not None


class GraderTemplate(models.Model):
    """A named grader prompt with <<conversation>> and <<rubric_item>>, for runs to grade with.
    The reference's own template is read from the user's copy of simple-evals
    (`grader_template import`), never shipped with the product."""

    name = models.CharField(max_length=100, unique=True)
    text = models.TextField()
    sha256 = models.CharField(max_length=64)
    # Where the text came from (a file or a simple-evals copy), for the record.
    source = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
