"""Whether a run graded the way the reference does: its grader request against the reference
graders' (grading.reference_grader), and its prompt by hash. Shown on the report page
and the run page, and written into the JSON, CSV and results-file downloads."""

from __future__ import annotations

from typing import Any

from grading.models import Endpoint, GraderConfig, Run
from grading.reference_grader import GraderVerdict, grader_verdict


def config_settings(config: GraderConfig) -> dict[str, Any]:
    return {
        "api_style": config.api_style,
        "model": config.model,
        "reasoning": config.reasoning,
        "reasoning_effort": config.reasoning_effort,
        "temperature": None if config.reasoning else config.temperature,
        "max_tokens": config.max_tokens,
        "system_message": config.system_message,
        "structured_output": config.structured_output,
    }


def endpoint_verdict(endpoint: Endpoint) -> GraderVerdict:
    """The endpoint's request against the reference's (its prompt is the run's, not known here)."""
    settings = {
        "api_style": endpoint.api_style,
        "model": endpoint.model,
        "reasoning": endpoint.reasoning,
        "reasoning_effort": endpoint.reasoning_effort,
        "temperature": None if endpoint.reasoning else endpoint.temperature,
        "max_tokens": endpoint.max_output_tokens,
        "system_message": endpoint.system_message,
        "structured_output": endpoint.structured_output,
    }
    return grader_verdict(settings, prompt_hash="")


def grader_mark(run: Run) -> dict[str, Any] | None:
    """The report's ``grader`` block; None for a run graded elsewhere (imported)."""
    config = run.grader_config
    if config is None:
        return None
    verdict = grader_verdict(config_settings(config), prompt_hash=config.prompt_hash)
    return {"model": config.model, "label": verdict.label, "prompt_label": verdict.prompt_label} | verdict.as_dict()
