"""Per consensus criterion: votes, attachments and how much the voters agree."""

from collections import defaultdict
from dataclasses import dataclass

from annotation.models import CantJudge, ConsensusCriterion, ConsensusVote, Criterion, Physician


@dataclass(frozen=True)
class ConsensusRow:
    entry: ConsensusCriterion
    conversations_voted: int
    votes: int
    applies: int
    does_not_apply: int
    attached: int
    # "Can't judge" answers: counted here, never as votes.
    cant_judge: int
    items_with_several_voters: int
    # Of the items with several voters, the share where all agree; None without such items.
    unanimous_share: float | None
    # Of all pairs of votes on the same item, the share that agree; None without pairs.
    pairwise_agreement: float | None


def consensus_overview() -> list[ConsensusRow]:
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
    rows: list[ConsensusRow] = []
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
            ConsensusRow(
                entry=entry,
                conversations_voted=len(items),
                votes=total,
                applies=applies,
                does_not_apply=total - applies,
                attached=attached.get(entry.id, 0),
                cant_judge=unsure.get(entry.id, 0),
                items_with_several_voters=multi,
                unanimous_share=unanimous / multi if multi else None,
                pairwise_agreement=agreeing_pairs / all_pairs if all_pairs else None,
            )
        )
    return rows
