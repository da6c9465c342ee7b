"""Building subset membership: Consensus, and custom subsets by filter or by hand. (Hard is built
from run scores: grading.reports.hard_subset.)"""

from collections.abc import Iterable, Sequence

from django.db import transaction
from django.db.models import QuerySet

from annotation.models import Conversation, Criterion, Subset
from annotation.services.subset_changes import subset_change_apply, subset_plan_set


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


def subset_rebuild(*, subset: Subset, conversation_ids: Iterable[int], action: str) -> tuple[int, int]:
    """Make the subset's members exactly these conversations, logged as a change like any other
    (so it can be undone until the next freeze); return (added, removed). Members that stay
    keep their place, new ones join at the end in the given order."""
    with transaction.atomic():
        subset = Subset.objects.select_for_update().get(pk=subset.pk)
        plan = subset_plan_set(subset=subset, conversation_ids=conversation_ids, action=action)
        if not plan.empty:
            subset_change_apply(subset=subset, plan=plan)
    return len(plan.added), len(plan.removed)


def consensus_subset_build(*, name: str = "consensus") -> tuple[Subset, int, int]:
    subset, _ = Subset.objects.get_or_create(name=name, defaults={"kind": Subset.Kind.CONSENSUS})
    added, removed = subset_rebuild(
        subset=subset,
        conversation_ids=consensus_candidates().values_list("id", flat=True),
        action="Rebuild from attached consensus criteria (build_subset)",
    )
    return subset, added, removed
