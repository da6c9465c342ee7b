"""Starting points for an endpoint: the two graders of the HealthBench papers, set to send
what the reference (simple-evals) sends (grading.reference_grader). On the page a
preset fills the form and the curator still saves; `endpoint add --preset` saves it through
the same form.

Our improvements (a strict JSON schema for the answer, temperature 0) stay options on top
of a preset; a run that uses one is marked "differs from the reference grader"."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from grading.reference_grader import ORIGINAL, PROFESSIONAL, ReferenceGrader


@dataclass(frozen=True)
class Preset:
    slug: str
    short: str  # the name `endpoint add --preset` takes
    title: str
    why: str
    initial: dict
    reference: ReferenceGrader


def _initial(reference: ReferenceGrader, *, name: str, timeout: float) -> dict:
    return {
        "name": name,
        "api_style": reference.api_style,
        "model": reference.model,
        "key_variable": "OPENAI_API_KEY",
        "reasoning": reference.reasoning,
        "reasoning_effort": reference.reasoning_effort,
        "temperature": reference.temperature,
        "max_output_tokens": reference.max_tokens,
        "system_message": reference.system_message,
        "structured_output": reference.structured_output,
        # The reference reads the answer strictly and asks again.
        "lenient_answers": False,
        "timeout_seconds": timeout,
        # OpenAI's Batch API: half of every price, answers within 24 hours.
        "batch_discount": Decimal("0.5"),
    }


PRESETS = {
    preset.slug: preset
    for preset in (
        Preset(
            slug="healthbench-professional",
            short="professional",
            title="HealthBench Professional grader",
            why="gpt-5.4-2026-03-05 through the Responses API at low reasoning effort, with no system message, "
            "output limit or JSON schema: the request simple-evals sends for HealthBench Professional.",
            initial=_initial(PROFESSIONAL, name="healthbench-professional-grader", timeout=120.0),
            reference=PROFESSIONAL,
        ),
        Preset(
            slug="healthbench-original",
            short="original",
            title="Original HealthBench grader",
            why="gpt-4.1-2025-04-14 on Chat Completions at temperature 0.5 with max_tokens 2048 and the reference's "
            "system message: the request simple-evals sends for the 2025 paper.",
            initial=_initial(ORIGINAL, name="healthbench-grader-gpt-4.1", timeout=60.0),
            reference=ORIGINAL,
        ),
    )
}
PRESETS_BY_SHORT = {preset.short: preset for preset in PRESETS.values()}
