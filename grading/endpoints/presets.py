"""One-click starting points for the curator's endpoint form: the two graders of the
HealthBench papers. The curator still reviews and saves; nothing is created by a click."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    slug: str
    title: str
    why: str
    initial: dict


PRESETS = {
    preset.slug: preset
    for preset in (
        Preset(
            slug="healthbench-professional",
            title="HealthBench Professional grader",
            why="GPT-5.4 at low reasoning effort through the Responses API, as HealthBench Professional "
            "grades (simple-evals, 2026). Change the model name if your account has another.",
            initial={
                "name": "healthbench-professional-grader",
                "api_style": "responses",
                "model": "gpt-5.4",
                "key_variable": "OPENAI_API_KEY",
                "reasoning": True,
                "reasoning_effort": "low",
                "temperature": None,
                "max_output_tokens": 4096,
                "structured_output": True,
                "timeout_seconds": 120.0,
            },
        ),
        Preset(
            slug="healthbench-original",
            title="Original HealthBench grader",
            why="A GPT-4.1-style grader on Chat Completions at temperature 0, as the 2025 paper grades.",
            initial={
                "name": "healthbench-grader-gpt-4.1",
                "api_style": "chat",
                "model": "gpt-4.1-2025-04-14",
                "key_variable": "OPENAI_API_KEY",
                "reasoning": False,
                "reasoning_effort": "",
                "temperature": 0.0,
                "max_output_tokens": 2048,
                "structured_output": False,
                "timeout_seconds": 60.0,
            },
        ),
    )
}
