"""Consensus: a physician's own ballot, and the curators' tallies."""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Q

from annotation.models import ConsensusCriterion, ConsensusVote, Conversation, Criterion, Physician


@dataclass(frozen=True)
class BallotRow:
    """One catalogue entry and this physician's own vote on it (None: not voted yet)."""

    consensus_criterion: ConsensusCriterion
    applies: bool | None


def ballot(*, physician: Physician, conversation: Conversation) -> list[BallotRow]:
    """The catalogue entries that fit the conversation's theme, with only this physician's votes.

    Nothing here reveals other physicians' votes or whether an entry is already attached.
    """
    entries = list(ConsensusCriterion.objects.filter(theme=conversation.theme).order_by("cluster"))
    mine = dict(
        ConsensusVote.objects.filter(physician=physician, conversation=conversation).values_list(
            "consensus_criterion_id", "applies"
        )
    )
    return [BallotRow(entry, mine.get(entry.id)) for entry in entries]


@dataclass(frozen=True)
class Tally:
    consensus_criterion: ConsensusCriterion
    applies: int
    does_not_apply: int
    # Votes of physicians on trial or removed: shown, never counted.
    uncounted: int
    attached: Criterion | None

    @property
    def needed(self) -> int:
        return max(0, settings.CONSENSUS_MIN_AGREE - self.applies)


def tallies(conversation: Conversation) -> list[Tally]:
    """For curators: every fitting or attached catalogue entry with its vote counts (3 queries)."""
    active = Q(votes__physician__status=Physician.Status.ACTIVE, votes__conversation=conversation)
    entries = (
        ConsensusCriterion.objects.filter(Q(theme=conversation.theme) | Q(attachments__conversation=conversation))
        .distinct()
        .order_by("cluster")
    )
    counts = {
        row["id"]: row
        for row in ConsensusCriterion.objects.filter(votes__conversation=conversation)
        .values("id")
        .annotate(
            applies=Count("votes", filter=active & Q(votes__applies=True)),
            does_not_apply=Count("votes", filter=active & Q(votes__applies=False)),
            uncounted=Count("votes", filter=~Q(votes__physician__status=Physician.Status.ACTIVE)),
        )
    }
    attached = {
        c.consensus_criterion_id: c
        for c in Criterion.objects.filter(conversation=conversation, consensus_criterion__isnull=False)
    }
    return [
        Tally(
            consensus_criterion=entry,
            applies=counts.get(entry.id, {}).get("applies", 0),
            does_not_apply=counts.get(entry.id, {}).get("does_not_apply", 0),
            uncounted=counts.get(entry.id, {}).get("uncounted", 0),
            attached=attached.get(entry.id),
        )
        for entry in entries
    ]
