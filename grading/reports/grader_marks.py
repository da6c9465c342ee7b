"""Whether a run graded the way the reference does: its grader request against the reference
graders' (grading.reference_grader), and its prompt by hash. Shown on the report page
and the run page, and written into the JSON, CSV and results-file downloads."""

from __future__ import annotations

from typing import Any

from grading.models import Endpoint, GraderConfig, GradingMode, Run
from grading.reference_grader import CUSTOM_PROMPT, GraderVerdict, grader_verdict


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


def _policy_system_message(run: Run) -> str:
    """The system message the run's responses were sampled with, if it or a run it regrades
    sampled them."""
    seen: set[int] = set()
    current: Run | None = run
    while current is not None and current.id not in seen:
        seen.add(current.id)
        if current.policy_config is not None:
            return current.policy_config.system_message
        current = current.responses_from
    return ""


def prompt_difference(run: Run) -> str:
    """Why the run's grader prompts are not byte for byte those simple-evals would send with
    the same template, or "" when they are (tests/test_reference_prompts.py)."""
    config = run.grader_config
    if config is not None and config.grading_mode == GradingMode.PER_RESPONSE:
        return "graded per response: all of a response's criteria in one prompt"
    if config is not None and config.grading_mode != GradingMode.PER_CRITERION:
        return f"graded in the {config.grading_mode} mode, not per criterion"
    if run.prompt_filling == Run.PromptFilling.REFERENCE:
        return ""
    if run.plan == Run.Plan.LABELLED:
        return "rubric items sent as [points] text; the meta-eval sends the bare rubric text"
    if _policy_system_message(run):
        return "the policy's system message left out of the conversation"
    return ""


def grader_mark(run: Run) -> dict[str, Any] | None:
    """The report's ``grader`` block; None for a run graded elsewhere (imported).

    ``prompt`` is "reference" only when the template is the published one and it is filled as
    simple-evals fills it; else "custom", with the reason in ``prompt_label``."""
    config = run.grader_config
    if config is None:
        return None
    verdict = grader_verdict(config_settings(config), prompt_hash=config.prompt_hash)
    mark = {"model": config.model, "label": verdict.label, "prompt_label": verdict.prompt_label} | verdict.as_dict()
    difference = prompt_difference(run) if verdict.prompt_is_reference else ""
    if difference:
        mark |= {"prompt": "custom", "prompt_label": f"{CUSTOM_PROMPT} ({difference})"}
    return mark | {"prompt_difference": difference, "answers": answers_label(config.lenient_answers)}


def answers_label(lenient: bool) -> str:
    """How the grader's answers were read (Endpoint.lenient_answers)."""
    if lenient:
        return "answers read leniently (text around the JSON, any fence, the last of several objects)"
    return "answers read as the reference reads them (one JSON object, else asked again)"


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
