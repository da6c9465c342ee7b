"""Writing a subset back out in the public HealthBench eval file format."""

from collections.abc import Iterator

from annotation.formats.healthbench import IdealData, RubricItem, format_row
from annotation.formats.professional import format_professional_row
from annotation.models import Conversation, Criterion, IdealResponse, Subset, SubsetMember

BATCH = 500


def export_subset_lines(subset: Subset) -> Iterator[str]:
    """One line per member: see `export_subset_entries`."""
    for line, _, _ in export_subset_entries(subset):
        yield line


def export_subset_entries(subset: Subset) -> Iterator[tuple[str, str, list[RubricItem]]]:
    """(line, prompt_id, rubric) per member, in the order they joined (file order for imported subsets).

    The Consensus subset is written with its cluster criteria only, as the public
    Consensus file is. A conversation imported from a HealthBench Professional row is written
    back as that row (its own keys, in their order).
    """
    member_ids = list(
        SubsetMember.objects.filter(subset=subset).order_by("id").values_list("conversation_id", flat=True)
    )
    only_cluster = subset.only_cluster_criteria
    for start in range(0, len(member_ids), BATCH):
        ids = member_ids[start : start + BATCH]
        conversations = {c.id: c for c in subset.conversations.model.objects.filter(id__in=ids)}
        criteria: dict[int, list[RubricItem]] = {}
        query = Criterion.objects.filter(conversation_id__in=ids)
        if only_cluster:
            query = query.filter(level=Criterion.Level.CLUSTER)
        for c in query.order_by("conversation_id", "position", "id").values_list(
            "conversation_id", "text", "points", "tags"
        ):
            criteria.setdefault(c[0], []).append(RubricItem(c[1], c[2], tuple(c[3])))
        ideals = {
            i.conversation_id: IdealData(i.text, i.group, tuple(i.reference_responses))
            for i in IdealResponse.objects.filter(conversation_id__in=ids, from_dataset=True)
        }
        for cid in ids:
            conversation = conversations[cid]
            rubrics = criteria.get(cid, [])
            yield (
                format_conversation_row(conversation, rubrics, ideals.get(cid)),
                conversation.prompt_id,
                rubrics,
            )


def format_conversation_row(conversation: Conversation, rubrics: list[RubricItem], ideal: IdealData | None) -> str:
    """A stored conversation as the line it came from: a HealthBench or a HealthBench Professional row."""
    if conversation.professional is not None:
        return format_professional_row(
            messages=conversation.messages,
            rubrics=rubrics,
            canary=conversation.canary,
            professional=conversation.professional,
        )
    return format_row(
        prompt_id=conversation.prompt_id,
        messages=conversation.messages,
        example_tags=conversation.example_tags,
        rubrics=rubrics,
        ideal=ideal,
        canary=conversation.canary,
    )
