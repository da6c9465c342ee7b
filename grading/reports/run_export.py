"""A run written back in the reference's format: the inverse of grading.reports.run_import.

One example per graded response, in response order (an imported run keeps its file order):
the conversation as ``prompt``, the response as ``completion``, its rubric items in grading
order with ``criteria_met`` (null for a grade that failed) and ``explanation``, and the
response's score as the report computes it (null when the report leaves it out). ``score``
and ``metrics`` are the run report's, in the reference's names, so the reference's own
aggregation of the examples gives the same means, and ``import_run`` of the file gives back
the same report.

Grades a run never made (it is still running, or was cancelled) have no rubric item in the
file: re-imported, such a response would count as complete. :func:`run_export` reports how
many there are so the command can warn.
"""

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from annotation.models import Conversation
from grading.models import Grade, Response, Run
from grading.prompt_filling import policy_turns
from grading.reports import scoring
from grading.reports.report import DEFAULT_SEED, run_report
from grading.reports.results_file import COMPUTED_FIELDS, LengthAdjustment, results_document
from healthbench_web.bulk import chunks

# Responses read per query: keeps memory flat on a paper-size run (80,000 responses).


@dataclass(frozen=True)
class RunExport:
    document: dict[str, Any]
    examples: int
    missing_grades: int  # grades the run should hold but never made


def _completion_id(prompt_id: str, text: str) -> str:
    # The reference names a completion by this hash when it samples it.
    return hashlib.sha256((prompt_id + text).encode("utf-8")).hexdigest()


def _usage(prompt_tokens: int | None, completion_tokens: int | None) -> dict[str, int | None]:
    total = None if prompt_tokens is None or completion_tokens is None else prompt_tokens + completion_tokens
    return {
        "input_tokens": prompt_tokens,
        "input_cached_tokens": None,
        "output_tokens": completion_tokens,
        "output_reasoning_tokens": None,
        "total_tokens": total,
    }


def _examples(run: Run, score_of: dict[int, float | None], adjustment: LengthAdjustment | None) -> Iterator[dict]:
    response_ids = list(score_of)
    for chunk in chunks(response_ids):
        responses = {
            r[0]: r
            for r in Response.objects.filter(id__in=chunk).values_list(
                "id",
                "conversation_id",
                "text",
                "completion_id",
                "prompt_tokens",
                "completion_tokens",
                "source",
                "parameters",
            )
        }
        conversations = {
            cid: (prompt_id, messages)
            for cid, prompt_id, messages in Conversation.objects.filter(
                id__in={r[1] for r in responses.values()}
            ).values_list("id", "prompt_id", "messages")
        }
        items: dict[int, list[dict]] = {rid: [] for rid in chunk}
        for rid, text, points, tags, status, met, explanation in (
            Grade.objects.filter(run=run, response_id__in=chunk)
            .order_by("response_id", "position", "id")
            .values_list("response_id", "criterion_text", "points", "tags", "status", "met", "explanation")
        ):
            items[rid].append(
                {
                    "criterion": text,
                    "points": points,
                    "tags": tags,
                    "criteria_met": met if status == Grade.Status.GRADED else None,
                    "explanation": explanation,
                }
            )
        for rid in chunk:
            _, conversation_id, text, completion_id, prompt_tokens, completion_tokens, source, parameters = responses[
                rid
            ]
            prompt_id, messages = conversations[conversation_id]
            score = score_of[rid]
            example = {
                "score": score,
                "usage": _usage(prompt_tokens, completion_tokens),
                "rubric_items": items[rid],
                # The messages the policy got: its system message first, as the reference writes them.
                "prompt": [
                    *policy_turns(sampled=source == Response.Source.SAMPLED, parameters=parameters),
                    *messages,
                ],
                "completion": [{"content": text, "role": "assistant"}],
                "prompt_id": prompt_id,
                "completion_id": completion_id or _completion_id(prompt_id, text),
            }
            if adjustment is not None:
                example["length_adjusted_score"] = (
                    None
                    if score is None
                    else float(
                        scoring.length_adjusted(
                            score, len(text), centre=adjustment.centre, penalty=adjustment.penalty_per_500
                        )
                    )
                )
            kept = (parameters or {}).get("imported") if source == Response.Source.IMPORTED else None
            # Kept as JSON text, in the file's key order (see run_import).
            yield example if not isinstance(kept, str) else _as_imported(example, json.loads(kept))


def _as_imported(example: dict, kept: dict) -> dict:
    """An imported example written back as it came: the file's keys in its order, the values
    the product computes (score, rubric items, completion, ids) from its rows, every other one
    (prompt, usage, fields the product does not know) as the file had it."""
    out = {}
    for key in kept.get("keys", list(example)):
        if key in COMPUTED_FIELDS and key in example:
            out[key] = example[key]
        elif key in kept:
            out[key] = kept[key]
        elif key == "prompt":  # equal to the stored conversation, so not kept twice
            out[key] = example["prompt"]
    # A length-adjusted score the file did not have (the run was marked for it after import).
    for key in COMPUTED_FIELDS:
        if key in example and key not in out:
            out[key] = example[key]
    return out


def run_export(*, run: Run, seed: int | None = DEFAULT_SEED) -> RunExport:
    """The results file of `run` as a JSON-ready dict (see grading.reports.results_file)."""
    report = run_report(run=run, seed=seed)
    data = report.data
    options = data["length_adjustment"]
    adjustment = None if options is None else LengthAdjustment(options["centre"], options["penalty_per_500"])
    # Response order, not the report's ranking: an imported run comes back in its file's order.
    score_of = {
        int(rid): None if math.isnan(score) else float(score)
        for rid, score in sorted(zip(report.ranked_response_ids.tolist(), report.ranked_scores.tolist(), strict=True))
    }
    examples = list(_examples(run, score_of, adjustment))
    document = results_document(
        score=data["score"],
        metrics=data["metrics"],
        examples=examples,
        length_adjustment=adjustment,
        grader=data.get("grader"),
    )
    return RunExport(document=document, examples=len(examples), missing_grades=data["counts"]["missing"])
