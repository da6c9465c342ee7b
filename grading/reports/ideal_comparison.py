"""Physician ideal responses against the reference responses their authors were shown.

The paper asked physicians to improve on model responses; this tells how often they did.
Scores come from any runs that graded the ideal responses and the references (for example
simple-evals' physician-completion modes brought in with import_run, or our own runs): a
graded response is recognised as an ideal response or as one of its references by its
conversation and its text.
"""

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from annotation.models import IdealResponse
from grading.models import Response, Run
from grading.reports.report import run_report_cached


def _normal(text: str) -> str:
    return " ".join(text.split())


def compare_ideals(rows: Iterable[tuple[str, float | None, list[float]]]) -> dict:
    """rows: (group, ideal score, scores of its references). Pure.

    An ideal response improved on its references when it scores above their mean, and
    worsened when below; ideal responses without a score or without scored references are
    counted apart.
    """
    groups: dict[str, dict] = defaultdict(
        lambda: {"ideal": [], "reference": [], "improved": 0, "worsened": 0, "same": 0, "beat_best": 0}
    )
    unmatched = 0
    for group, ideal, references in rows:
        if ideal is None or not references:
            unmatched += 1
            continue
        g = groups[group]
        mean_ref = float(np.mean(references))
        g["ideal"].append(ideal)
        g["reference"].append(mean_ref)
        g["improved"] += ideal > mean_ref
        g["worsened"] += ideal < mean_ref
        g["same"] += ideal == mean_ref
        g["beat_best"] += ideal > max(references)
    out = {}
    for group, g in sorted(groups.items()):
        n = len(g["ideal"])
        out[group] = {
            "n": n,
            "mean_ideal": float(np.mean(g["ideal"])),
            "mean_reference": float(np.mean(g["reference"])),
            "improved": g["improved"] / n,
            "worsened": g["worsened"] / n,
            "same": g["same"] / n,
            "beat_best_reference": g["beat_best"] / n,
        }
    return {"groups": out, "without_comparison": unmatched}


def ideal_comparison(*, runs: list[Run]) -> dict:
    """Match the runs' scored responses to ideal responses and their references, and compare."""
    scores: dict[int, float] = {}
    for run in runs:
        report = run_report_cached(run=run)
        scored = ~np.isnan(report.ranked_scores)
        scores.update(
            zip(report.ranked_response_ids[scored].tolist(), report.ranked_scores[scored].tolist(), strict=True)
        )
    by_text: dict[tuple[int, str], list[float]] = defaultdict(list)
    for response_id, conversation_id, text in Response.objects.filter(id__in=list(scores)).values_list(
        "id", "conversation_id", "text"
    ):
        by_text[(conversation_id, _normal(text))].append(scores[response_id])
    conversations = {key[0] for key in by_text}
    rows = []
    ideals = IdealResponse.objects.filter(conversation_id__in=conversations).order_by("id")
    for ideal in ideals.values("conversation_id", "text", "group", "condition", "reference_responses"):
        references = ideal["reference_responses"] if isinstance(ideal["reference_responses"], list) else []
        if not references:
            continue  # written without references: nothing to improve on
        own = by_text.get((ideal["conversation_id"], _normal(ideal["text"])))
        ref_scores = [s for ref in references for s in by_text.get((ideal["conversation_id"], _normal(ref)), [])]
        rows.append((ideal["group"] or ideal["condition"], float(np.mean(own)) if own else None, ref_scores))
    result = compare_ideals(rows)
    result["ideal_responses_with_references"] = len(rows)
    return result
