"""The Hard subset: the conversations that graded runs score lowest on average. It reads run
scores (grading.reports.report), so it lives in grading and writes membership through
annotation's subset services (the dependency points from grading to annotation).
"""

import numpy as np

from annotation.models import Subset
from annotation.services.subset_builders import subset_rebuild
from grading.models import Response, Run
from grading.reports.report import run_report_cached


def rankable_runs():
    """The runs whose scores can rank conversations: finished or imported ones."""
    return Run.objects.filter(status__in=[Run.Status.DONE, Run.Status.IMPORTED]).order_by("name")


def hardest_conversations(mean_scores: dict[int, float], n: int) -> list[int]:
    """The n conversation ids with the lowest mean score (ties broken by id, for stability)."""
    return [cid for cid, _ in sorted(mean_scores.items(), key=lambda item: (item[1], item[0]))[:n]]


def paired_conversation_mean_scores(runs: list[Run]) -> tuple[dict[int, float], int]:
    """Mean example score per conversation over every scored response of the given runs, on
    the conversations that every run scored (paired, as run comparisons are: a conversation
    one run never scored would otherwise be ranked on the other runs alone), and how many
    conversations were left out for that reason."""
    totals: dict[int, list[float]] = {}
    scored_by: list[set[int]] = []
    for run in runs:
        report = run_report_cached(run=run)
        scored = ~np.isnan(report.ranked_scores)
        ids = report.ranked_response_ids[scored].tolist()
        scores = report.ranked_scores[scored].tolist()
        conversation_of = dict(Response.objects.filter(id__in=ids).values_list("id", "conversation_id"))
        for response_id, score in zip(ids, scores, strict=True):
            totals.setdefault(conversation_of[response_id], []).append(score)
        scored_by.append(set(conversation_of.values()))
    shared = set.intersection(*scored_by) if scored_by else set()
    means = {cid: sum(values) / len(values) for cid, values in totals.items() if cid in shared}
    return means, len(totals) - len(means)


def conversation_mean_scores(runs: list[Run]) -> dict[int, float]:
    """paired_conversation_mean_scores without the count of conversations left out."""
    return paired_conversation_mean_scores(runs)[0]


def hard_subset_build(*, runs: list[Run], n: int = 1000, name: str = "hard") -> tuple[Subset, int, int]:
    """Make `name` the n conversations scored lowest on average across `runs`."""
    subset, _ = Subset.objects.get_or_create(name=name, defaults={"kind": Subset.Kind.HARD})
    ids = hardest_conversations(conversation_mean_scores(runs), n)
    names = ", ".join(run.name for run in runs)
    added, removed = subset_rebuild(
        subset=subset, conversation_ids=ids, action=f"Build Hard: the {n} lowest-scoring over {names} (build_subset)"
    )
    return subset, added, removed
