"""Building subset membership: Consensus, Hard, and custom subsets by filter or by hand."""

from collections.abc import Iterable, Sequence

import numpy as np
from django.db import transaction
from django.db.models import QuerySet

from annotation.models import Conversation, Criterion, Subset, SubsetMember
from grading.models import Response
from grading.reports.report import run_report_cached
from healthbench_web.bulk import db_now, insert_rows


def consensus_candidates() -> QuerySet[Conversation]:
    """Conversations with at least one positive-points consensus criterion attached."""
    attached = Criterion.objects.filter(level=Criterion.Level.CLUSTER, points__gt=0).values("conversation_id")
    return Conversation.objects.filter(id__in=attached).order_by("id")


def filtered_conversations(
    *,
    themes: Sequence[str] = (),
    subsets: Sequence[str] = (),
    min_turns: int | None = None,
    has_cluster: bool | None = None,
) -> QuerySet[Conversation]:
    query = Conversation.objects.all()
    if themes:
        query = query.filter(theme__in=themes)
    if subsets:
        query = query.filter(subsets__name__in=subsets).distinct()
    if has_cluster is not None:
        with_cluster = Criterion.objects.filter(level=Criterion.Level.CLUSTER).values("conversation_id")
        query = query.filter(id__in=with_cluster) if has_cluster else query.exclude(id__in=with_cluster)
    if min_turns is not None:
        # Turns live inside the messages document: filter in Python on the smaller set.
        ids = [c.id for c in query.only("id", "messages") if len(c.messages) >= min_turns]
        query = Conversation.objects.filter(id__in=ids)
    return query.order_by("id")


def subset_members_set(*, subset: Subset, conversation_ids: Iterable[int]) -> tuple[int, int]:
    """Make the subset's members exactly these conversations; return (added, removed).

    Members that stay keep their place, new ones join at the end in the given order.
    """
    wanted = list(dict.fromkeys(conversation_ids))
    with transaction.atomic():
        subset = Subset.objects.select_for_update().get(pk=subset.pk)
        present = set(SubsetMember.objects.filter(subset=subset).values_list("conversation_id", flat=True))
        keep = set(wanted)
        removed, _ = SubsetMember.objects.filter(subset=subset).exclude(conversation_id__in=keep).delete()
        now = db_now()
        added = insert_rows(
            SubsetMember,
            SubsetMember.INSERT_COLUMNS,
            [(subset.id, cid, now) for cid in wanted if cid not in present],
        )
    return len(added), removed


def subset_members_add(*, subset: Subset, conversation_ids: Iterable[int]) -> int:
    with transaction.atomic():
        subset = Subset.objects.select_for_update().get(pk=subset.pk)
        present = set(SubsetMember.objects.filter(subset=subset).values_list("conversation_id", flat=True))
        now = db_now()
        new = [(subset.id, cid, now) for cid in dict.fromkeys(conversation_ids) if cid not in present]
        return len(insert_rows(SubsetMember, SubsetMember.INSERT_COLUMNS, new))


def subset_members_remove(*, subset: Subset, conversation_ids: Iterable[int]) -> int:
    removed, _ = SubsetMember.objects.filter(subset=subset, conversation_id__in=list(conversation_ids)).delete()
    return removed


def consensus_subset_build(*, name: str = "consensus") -> tuple[Subset, int, int]:
    subset, _ = Subset.objects.get_or_create(name=name, defaults={"kind": Subset.Kind.CONSENSUS})
    added, removed = subset_members_set(
        subset=subset, conversation_ids=consensus_candidates().values_list("id", flat=True)
    )
    return subset, added, removed


def hardest_conversations(mean_scores: dict[int, float], n: int) -> list[int]:
    """The n conversation ids with the lowest mean score (ties broken by id, for stability)."""
    return [cid for cid, _ in sorted(mean_scores.items(), key=lambda item: (item[1], item[0]))[:n]]


def paired_conversation_mean_scores(runs) -> tuple[dict[int, float], int]:
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


def conversation_mean_scores(runs) -> dict[int, float]:
    """paired_conversation_mean_scores without the count of conversations left out."""
    return paired_conversation_mean_scores(runs)[0]


def hard_subset_build(*, runs, n: int = 1000, name: str = "hard") -> tuple[Subset, int, int]:
    """Make `name` the n conversations scored lowest on average across `runs`."""
    subset, _ = Subset.objects.get_or_create(name=name, defaults={"kind": Subset.Kind.HARD})
    ids = hardest_conversations(conversation_mean_scores(runs), n)
    added, removed = subset_members_set(subset=subset, conversation_ids=ids)
    return subset, added, removed
