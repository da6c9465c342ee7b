"""Voting on the consensus criteria that fit a conversation's theme: one ballot per conversation,
done on the votes page. Nobody votes on a conversation whose responses they label (the label
page would have shown them the criteria others' votes attached); gold voting items are given
as whole ballots."""

from collections import defaultdict
from collections.abc import Sequence

from annotation.models import Assignment, GoldItem
from annotation.task_kinds.base import Excluded, Item, TaskKind

LABELED = "label{s} its responses and so has seen the consensus criteria already attached"


class ConsensusVote(TaskKind):
    value = Assignment.Kind.CONSENSUS_VOTE
    page = "votes"

    def excluded(self, conversation_ids: Sequence[int]) -> Excluded:
        """Those who hold labeling tasks on the conversation (open or done)."""
        found: Excluded = defaultdict(dict)
        tasks = Assignment.objects.filter(conversation_id__in=conversation_ids, kind=Assignment.Kind.LABEL).exclude(
            status__in=Assignment.INACTIVE
        )
        for cid, pid in tasks.values_list("conversation_id", "physician_id"):
            found[cid][pid] = LABELED
        return found

    def gold_pool(self) -> list[Item]:
        """A voting task per conversation with a gold voting item: one ballot holds them."""
        rows = GoldItem.objects.filter(consensus_criterion__isnull=False).order_by("id")
        return [(cid, None, None) for cid in dict.fromkeys(rows.values_list("conversation_id", flat=True))]


KIND = ConsensusVote()
