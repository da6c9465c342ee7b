"""The reference grader's request, and how a grader's settings differ from it. Pure Python,
no Django.

The public reference, openai/simple-evals, grades HealthBench with one of two samplers:

* Original (2025): a Chat Completions sampler on ``gpt-4.1-2025-04-14`` with the short
  generic system message of its API samplers, ``max_tokens`` 2048 and the sampler's default
  temperature, 0.5 (``simple_evals.py`` and ``healthbench_eval.py``; commit
  ee3b0318d8d1d9d72755a4120879be65f7c07e9e).
* Professional (2026, pull request #108): a Responses sampler on ``gpt-5.4-2026-03-05`` as a
  reasoning model at low effort. That sampler sends only the model, the input and the
  reasoning effort: no system message, no output limit, no temperature.

Neither asks for structured output. The grader prompt is judged apart, by its hash
(``PUBLISHED_TEMPLATE_SHA256``): the product never contains the reference's wording.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# sha256 of the grader template (GRADER_TEMPLATE in healthbench_eval.py, after its .strip())
# of openai/simple-evals at commit ee3b0318d8d1d9d72755a4120879be65f7c07e9e (2025-07). Tested
# against a checkout when SIMPLE_EVALS_DIR is set (tests/test_reference_grader.py).
PUBLISHED_TEMPLATE_SHA256 = "2adffd51fd259554ebcd036ad1072d4aa2b7ce3aec2bbffe36271f911632ed3c"
REFERENCE_COMMIT = "ee3b0318d8d1d9d72755a4120879be65f7c07e9e"

# The system message of the reference's API samplers (an ordinary assistant greeting, not
# part of the grader prompt).
REFERENCE_SYSTEM_MESSAGE = "You are a helpful assistant."

REFERENCE_PROMPT = "reference grader prompt"
CUSTOM_PROMPT = "custom grader prompt"
DIFFERS = "differs from the reference grader"


@dataclass(frozen=True)
class ReferenceGrader:
    slug: str
    title: str
    api_style: str
    model: str
    reasoning: bool
    reasoning_effort: str
    temperature: float | None
    max_tokens: int | None
    system_message: str
    structured_output: bool = False

    def settings(self) -> dict[str, Any]:
        return {
            "api_style": self.api_style,
            "model": self.model,
            "reasoning": self.reasoning,
            "reasoning_effort": self.reasoning_effort,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "system_message": self.system_message,
            "structured_output": self.structured_output,
        }


ORIGINAL = ReferenceGrader(
    slug="original",
    title="Original HealthBench grader",
    api_style="chat",
    model="gpt-4.1-2025-04-14",
    reasoning=False,
    reasoning_effort="",
    temperature=0.5,
    max_tokens=2048,
    system_message=REFERENCE_SYSTEM_MESSAGE,
)
PROFESSIONAL = ReferenceGrader(
    slug="professional",
    title="HealthBench Professional grader",
    api_style="responses",
    model="gpt-5.4-2026-03-05",
    reasoning=True,
    reasoning_effort="low",
    temperature=None,
    max_tokens=None,
    system_message="",
)
REFERENCE_GRADERS = {grader.slug: grader for grader in (ORIGINAL, PROFESSIONAL)}


@dataclass(frozen=True)
class GraderVerdict:
    """How one grader compares with the nearest reference grader."""

    reference: ReferenceGrader
    differences: tuple[str, ...]
    prompt_hash: str

    @property
    def matches(self) -> bool:
        return not self.differences

    @property
    def prompt_is_reference(self) -> bool:
        return self.prompt_hash == PUBLISHED_TEMPLATE_SHA256

    @property
    def prompt_label(self) -> str:
        return REFERENCE_PROMPT if self.prompt_is_reference else CUSTOM_PROMPT

    @property
    def label(self) -> str:
        """One line for a report: which reference, or how it differs."""
        if self.matches:
            return f"the reference grader request ({self.reference.title})"
        return f"{DIFFERS} ({self.reference.title}): " + "; ".join(self.differences)

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference.slug if self.matches else None,
            "nearest_reference": self.reference.slug,
            "differences": list(self.differences),
            "prompt": "reference" if self.prompt_is_reference else "custom",
            "prompt_sha256": self.prompt_hash,
        }


def _shown(value: Any) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57] + "...")
    return f"{value:g}" if isinstance(value, float) else str(value)


LABELS = {
    "api_style": "API",
    "model": "model",
    "reasoning": "reasoning model",
    "reasoning_effort": "reasoning effort",
    "temperature": "temperature",
    "max_tokens": "output limit",
    "system_message": "system message",
    "structured_output": "strict JSON schema",
}


def differences(settings: Mapping[str, Any], reference: ReferenceGrader) -> tuple[str, ...]:
    """What `settings` (the keys of ReferenceGrader.settings) send unlike `reference`.

    A reasoning model's temperature is never sent, so it is not compared."""
    found = []
    wanted = reference.settings()
    for key, value in wanted.items():
        given = settings.get(key)
        if key == "temperature" and (settings.get("reasoning") or reference.reasoning):
            continue
        if key in ("reasoning_effort", "system_message"):
            given = given or ""
        if key == "temperature" and given is not None and value is not None and float(given) == float(value):
            continue
        if given != value:
            found.append(f"{LABELS[key]} {_shown(given)} (the reference: {_shown(value)})")
    return tuple(found)


def grader_verdict(settings: Mapping[str, Any], *, prompt_hash: str) -> GraderVerdict:
    """The nearest reference grader (fewest differences; the original on a tie) and the
    differences from it."""
    verdicts = [GraderVerdict(r, differences(settings, r), prompt_hash) for r in REFERENCE_GRADERS.values()]
    return min(verdicts, key=lambda verdict: len(verdict.differences))  # min keeps the first of equals
