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


def _describe(config: GraderConfig) -> str:
    settings = config_settings(config)
    shown = [config.model, "Responses" if config.api_style == "responses" else "Chat Completions"]
    if config.reasoning:
        shown.append(f"effort {config.reasoning_effort or 'default'}")
    elif settings["temperature"] is not None:
        shown.append(f"temperature {settings['temperature']:g}")
    if config.structured_output:
        shown.append("JSON schema")
    return ", ".join(shown)


def grader_warnings(run_a: Run, run_b: Run) -> list[str]:
    """What the compare page warns about: the two runs were graded differently, so a
    difference between them may be the graders', not the responses'."""
    a, b = run_a.grader_config, run_b.grader_config
    if a is None and b is None:
        return []
    if a is None or b is None:
        imported = run_a if a is None else run_b
        return [
            f"{imported.name} was imported: its grader and grader prompt are not known here, so part of the "
            "difference may come from the graders."
        ]
    warnings = []
    if config_settings(a) != config_settings(b):
        warnings.append(
            f"The runs used different graders ({run_a.name}: {_describe(a)}; {run_b.name}: {_describe(b)}): "
            "part of the difference may come from the graders."
        )
    if a.prompt_hash != b.prompt_hash:
        label_a = grader_verdict(config_settings(a), prompt_hash=a.prompt_hash).prompt_label
        label_b = grader_verdict(config_settings(b), prompt_hash=b.prompt_hash).prompt_label
        warnings.append(
            f"The runs used different grader prompts ({run_a.name}: {label_a} {a.prompt_hash[:12]}; "
            f"{run_b.name}: {label_b} {b.prompt_hash[:12]})."
        )
    return warnings
