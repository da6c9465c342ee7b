"""Per consensus criterion: votes, attachments and how much the voters agree."""

from collections import defaultdict

from annotation.models import CantJudge, ConsensusCriterion, ConsensusVote, Criterion, Physician


def consensus_overview() -> list[dict]:
    """One row per catalogue entry. Only active physicians' votes count, as for attachment."""
    votes: dict[int, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    counted = ConsensusVote.objects.filter(physician__status=Physician.Status.ACTIVE)
    for entry_id, conversation_id, vote in counted.values_list("consensus_criterion_id", "conversation_id", "applies"):
        votes[entry_id][conversation_id].append(vote)
    attached: dict[int, int] = defaultdict(int)
    for entry_id in Criterion.objects.filter(consensus_criterion__isnull=False).values_list(
        "consensus_criterion_id", flat=True
    ):
        attached[entry_id] += 1
    unsure: dict[int, int] = defaultdict(int)
    for entry_id in CantJudge.objects.filter(consensus_criterion__isnull=False).values_list(
        "consensus_criterion_id", flat=True
    ):
        unsure[entry_id] += 1
    rows = []
    for entry in ConsensusCriterion.objects.order_by("cluster"):
        items = votes.get(entry.id, {})
        applies = sum(v.count(True) for v in items.values())
        total = sum(len(v) for v in items.values())
        agreeing_pairs = all_pairs = unanimous = multi = 0
        for labels in items.values():
            n = len(labels)
            if n < 2:
                continue
            multi += 1
            yes = labels.count(True)
            agreeing_pairs += yes * (yes - 1) // 2 + (n - yes) * (n - yes - 1) // 2
            all_pairs += n * (n - 1) // 2
            unanimous += yes in (0, n)
        rows.append(
            {
                "entry": entry,
                "conversations_voted": len(items),
                "votes": total,
                "applies": applies,
                "does_not_apply": total - applies,
                "attached": attached.get(entry.id, 0),
                # "Can't judge" answers: counted here, never as votes.
                "cant_judge": unsure.get(entry.id, 0),
                "items_with_several_voters": multi,
                "unanimous_share": unanimous / multi if multi else None,
                "pairwise_agreement": agreeing_pairs / all_pairs if all_pairs else None,
            }
        )
    return rows
