"""What a grading mode is: the one shape every mode module fills in (grading.pipeline.modes
registers them). A mode decides how a run asks its grader about a response's criteria: the
prompt and the reading of its answer (its own pure module), the requests a batch sends and
their cache keys, what the estimate counts, what the grader snapshot records, and how
`endpoint check` asks one question in it. Nothing outside a mode's module asks which mode a
run is in; it asks the mode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Protocol

from grading.pipeline.request_shape import CHARS_PER_TOKEN

if TYPE_CHECKING:
    from grading.models import Run
    from grading.pipeline.batch_requests import GraderRequest, Item
    from grading.pipeline.endpoint import CallTarget
    from grading.pipeline.replies import Reply

# Providers cache a prompt's prefix once it is this long, and serve it in steps (OpenAI:
# 1,024 tokens, then steps of 128); the grader prompts of one response share everything up
# to the criterion (or the criteria, per response). The test server reports the same.
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128


def cacheable(calls: int, prefix_chars: int) -> int:
    """Characters the cache serves to the calls about one response after its first: the
    shared prefix in whole steps, once it reaches the provider's minimum. Whole steps lose
    half a step on average (the prefix's exact length is not known here, to a step)."""
    step = CACHE_STEP_TOKENS * CHARS_PER_TOKEN
    if prefix_chars // step * step < CACHE_MIN_TOKENS * CHARS_PER_TOKEN:
        return 0
    return max(0, calls - 1) * (prefix_chars - step // 2)


class EstimateCounts(Protocol):
    """What a mode's line of the estimate reads (grading.pipeline.estimate.Estimate)."""

    @property
    def grader_calls(self) -> int: ...

    @property
    def grades(self) -> int: ...

    @property
    def responses(self) -> int: ...

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...

    @property
    def explanation_length(self) -> str: ...


class Mode(ABC):
    """One grading mode. `name` is what a run's grader snapshot and each grade store
    (GradingMode in grading.models lists the names the database accepts)."""

    name: str
    # Whether the run's explanation length (response_prompt.EXPLANATIONS) applies.
    takes_explanation: bool = False
    # Whether its prompts are the run's grader template filled in (else the mode's own prompt;
    # the template then serves the criteria asked again alone).
    fills_template: bool = True

    @abstractmethod
    def snapshot_fields(self, explanation: str) -> dict[str, Any]:
        """What the run's grader snapshot records of the mode beside the endpoint's settings
        (their hash names the snapshot, so a mode that records nothing keeps earlier names)."""

    @abstractmethod
    def requests(self, run: Run, grader: CallTarget, items: list[Item]) -> dict[str, GraderRequest]:
        """The distinct requests of `items`, by request key (its cache-key part included)."""

    @abstractmethod
    def prompt_overhead(self, template: str, explanation: str) -> int:
        """Characters of one prompt besides the conversation and the criteria."""

    @abstractmethod
    def calls_and_chars(
        self, n: int, *, conversation_chars: int, item_chars: int, overhead: int, template: str, explanation: str
    ) -> tuple[int, int, int]:
        """For one response of `n` criteria: (grader calls, prompt characters, characters the
        provider's prompt cache serves). ``item_chars``: the criteria's texts."""

    @abstractmethod
    def answer_tokens(self, explanation: str, *, calls: int, grades: int) -> int:
        """The grader's answers, reasoning aside."""

    @abstractmethod
    def estimate_line(self, counts: EstimateCounts) -> str:
        """The estimate's line on the grader's calls and tokens."""

    @abstractmethod
    def check_request(
        self, target: CallTarget, *, conversation: str, criterion: str, points: int, template: str
    ) -> tuple[str, dict]:
        """`endpoint check`'s one question in this mode, (path, body), filled as a run fills
        its prompts: `criterion` of `conversation` (a conversation block), in the run's grader
        `template` where the mode fills one."""

    @abstractmethod
    def check_verdict(self, reply: Reply, *, lenient: bool) -> str:
        """ "met" or "not met" as a run would read `reply`; raises MalformedAnswer."""
