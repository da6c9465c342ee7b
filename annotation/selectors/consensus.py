"""Consensus: a physician's own ballot, and the curators' tallies."""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Q

from annotation.models import CantJudge, ConsensusCriterion, ConsensusVote, Conversation, Criterion, Physician
from annotation.selectors.gold import GoldFeedback, ballot_feedback
from healthbench_web.compiled_query import SENTINEL_TEXT, CompiledQuery, sentinels


@dataclass(frozen=True)
class BallotRow:
    """One catalogue entry and this physician's own vote on it (None: not voted yet)."""

    consensus_criterion: ConsensusCriterion
    applies: bool | None
    # The physician's "can't judge" reason on it, if that was their answer.
    cant_judge: str = ""
    # A gold item's known answer and rationale, once this physician has voted on it.
    gold: GoldFeedback | None = None

    @property
    def answered(self) -> bool:
        return self.applies is not None or bool(self.cant_judge)

    @property
    def cant_judge_label(self) -> str:
        return CantJudge.Reason(self.cant_judge).label if self.cant_judge else ""


# The ballot's reads, on every page and vote: compiled once (healthbench_web/compiled_query.py).
_entries = CompiledQuery(
    lambda theme: ConsensusCriterion.objects.filter(theme=theme).order_by("cluster"), SENTINEL_TEXT
)
_votes = CompiledQuery(
    lambda physician_id, conversation_id: ConsensusVote.objects.filter(
        physician_id=physician_id, conversation_id=conversation_id
    ).values_list("consensus_criterion_id", "applies"),
    *sentinels(2),
)
_unsure = CompiledQuery(
    lambda physician_id, conversation_id: CantJudge.objects.filter(
        physician_id=physician_id, conversation_id=conversation_id, consensus_criterion__isnull=False
    ).values_list("consensus_criterion_id", "reason"),
    *sentinels(2),
)


def ballot(*, physician: Physician, conversation: Conversation) -> list[BallotRow]:
    """The catalogue entries that fit the conversation's theme, with only this physician's votes.

    Nothing here reveals other physicians' votes or whether an entry is already attached.
    """
    entries = _entries.all(conversation.theme)
    mine = dict(_votes.all(physician.id, conversation.id))
    unsure = dict(_unsure.all(physician.id, conversation.id))
    gold = ballot_feedback(physician_id=physician.id, conversation_id=conversation.id)
    return [BallotRow(entry, mine.get(entry.id), unsure.get(entry.id, ""), gold.get(entry.id)) for entry in entries]


@dataclass(frozen=True)
class Tally:
    consensus_criterion: ConsensusCriterion
    applies: int
    does_not_apply: int
    # Votes of physicians on trial or removed: shown, never counted.
    uncounted: int
    attached: Criterion | None
    # "Can't judge" answers on this item, with their reasons: never counted as votes.
    cant_judge: tuple[CantJudge, ...] = ()

    @property
    def needed(self) -> int:
        return max(0, settings.CONSENSUS_MIN_AGREE - self.applies)


def tallies(conversation: Conversation) -> list[Tally]:
    """For curators: every fitting or attached catalogue entry with its vote counts (4 queries)."""
    active = Q(votes__physician__status=Physician.Status.ACTIVE, votes__conversation=conversation)
    entries = (
        ConsensusCriterion.objects.filter(Q(theme=conversation.theme) | Q(attachments__conversation=conversation))
        .distinct()
        .order_by("cluster")
    )
    # Per entry: (applies, does not apply, uncounted).
    counts: dict[int, tuple[int, int, int]] = {
        entry_id: (applies, does_not_apply, uncounted)
        for entry_id, applies, does_not_apply, uncounted in ConsensusCriterion.objects.filter(
            votes__conversation=conversation
        )
        .values("id")
        .annotate(
            applies=Count("votes", filter=active & Q(votes__applies=True)),
            does_not_apply=Count("votes", filter=active & Q(votes__applies=False)),
            uncounted=Count("votes", filter=~Q(votes__physician__status=Physician.Status.ACTIVE)),
        )
        .values_list("id", "applies", "does_not_apply", "uncounted")
    }
    attached = {
        c.consensus_criterion_id: c
        for c in Criterion.objects.filter(conversation=conversation, consensus_criterion__isnull=False)
    }
    unsure: dict[int, list[CantJudge]] = {}
    for answer in CantJudge.objects.filter(conversation=conversation, consensus_criterion__isnull=False).select_related(
        "physician__user"
    ):
        if answer.consensus_criterion_id is not None:  # always, by the filter
            unsure.setdefault(answer.consensus_criterion_id, []).append(answer)
    return [
        Tally(entry, *counts.get(entry.id, (0, 0, 0)), attached.get(entry.id), tuple(unsure.get(entry.id, ())))
        for entry in entries
    ]


def cant_judge_answers(conversation: Conversation) -> list[CantJudge]:
    """For curators: every "can't judge" on the conversation's labeling and voting items."""
    return list(
        CantJudge.objects.filter(conversation=conversation)
        .select_related("physician__user", "criterion", "consensus_criterion", "response")
        .order_by("consensus_criterion_id", "criterion_id", "response_id", "id")
    )
