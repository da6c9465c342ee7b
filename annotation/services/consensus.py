"""Consensus votes, and attaching a consensus criterion once enough physicians agree."""

from django.conf import settings
from django.db import transaction

from annotation.models import (
    Assignment,
    CantJudge,
    ConsensusCriterion,
    ConsensusVote,
    Conversation,
    Criterion,
    Physician,
)
from annotation.rubric_versions import rubric_changed
from annotation.services.assignments import assignment_complete
from annotation.services.gold import gold_answer_vote
from annotation.services.locking import conversation_lock
from annotation.services.rubric import next_position
from annotation.task_kinds.consensus_vote import KIND as CONSENSUS_VOTE


def agreeing_votes(*, conversation_id: int, consensus_criterion_id: int) -> int:
    """Votes that count: 'applies' from physicians who are active (not on trial, not removed)."""
    return ConsensusVote.objects.filter(
        conversation_id=conversation_id,
        consensus_criterion_id=consensus_criterion_id,
        applies=True,
        physician__status=Physician.Status.ACTIVE,
    ).count()


def consensus_sync(*, conversation_id: int, consensus_criterion: ConsensusCriterion) -> bool:
    """Attach or detach one consensus criterion to match the votes; True when it is attached.

    Call with the conversation locked (conversation_lock), so that the count sees every vote
    committed before this one. Only criteria attached by votes are ever detached: one that
    came from a HealthBench file stays whatever the votes say.
    """
    agree = agreeing_votes(conversation_id=conversation_id, consensus_criterion_id=consensus_criterion.id)
    if agree >= settings.CONSENSUS_MIN_AGREE:
        # The unique constraint one_attachment_per_consensus_criterion backs the lock: if two
        # writers ever got here at once, get_or_create's IntegrityError path returns the winner's row.
        _, created = Criterion.objects.get_or_create(
            conversation_id=conversation_id,
            consensus_criterion=consensus_criterion,
            defaults={
                # Called only when the row is created (Django 5); the stubs expect a plain value.
                "position": lambda: next_position(conversation_id),  # type: ignore[misc]
                "text": consensus_criterion.text,
                "points": consensus_criterion.points,
                "tags": consensus_criterion.tags(),
                "level": Criterion.Level.CLUSTER,
                "axis": consensus_criterion.axis,
                "origin": Criterion.Origin.VOTES,
            },
        )
        if created:
            rubric_changed([conversation_id])
        return True
    deleted, _ = Criterion.objects.filter(
        conversation_id=conversation_id, consensus_criterion=consensus_criterion, origin=Criterion.Origin.VOTES
    ).delete()
    if deleted:
        rubric_changed([conversation_id])
    return Criterion.objects.filter(conversation_id=conversation_id, consensus_criterion=consensus_criterion).exists()


def vote_cast(
    *, physician: Physician, conversation: Conversation, consensus_criterion: ConsensusCriterion, applies: bool
) -> ConsensusVote:
    """Record (or change) a physician's vote and bring the attachment up to date."""
    with transaction.atomic():
        conversation_lock(conversation.id)
        vote, _ = ConsensusVote.objects.update_or_create(
            physician=physician,
            conversation=conversation,
            consensus_criterion=consensus_criterion,
            defaults={"applies": applies},
        )
        # A vote replaces a "can't judge" given to the same item before.
        CantJudge.objects.filter(
            physician=physician, conversation=conversation, consensus_criterion=consensus_criterion
        ).delete()
        consensus_sync(conversation_id=conversation.id, consensus_criterion=consensus_criterion)
        # On a gold item, the first answer is kept for the physician's gold accuracy.
        gold_answer_vote(
            physician=physician,
            conversation_id=conversation.id,
            consensus_criterion_id=consensus_criterion.id,
            applies=applies,
        )
        ballot_complete(physician=physician, conversation=conversation)
    return vote


def ballot_complete(*, physician: Physician, conversation: Conversation) -> None:
    """Mark the vote task done once every fitting entry has a vote or a "can't judge"."""
    fitting = ConsensusCriterion.objects.filter(theme=conversation.theme).count()
    answered = ConsensusVote.objects.filter(
        physician=physician, conversation=conversation, consensus_criterion__theme=conversation.theme
    ).count()
    answered += CantJudge.objects.filter(
        physician=physician, conversation=conversation, consensus_criterion__theme=conversation.theme
    ).count()
    if answered >= fitting:
        task = Assignment.objects.filter(
            physician=physician, conversation=conversation, kind=CONSENSUS_VOTE.value
        ).first()
        if task is not None:
            assignment_complete(assignment=task)


def consensus_recount(*, physician: Physician) -> int:
    """Re-decide every item this physician said applies to; returns how many were re-decided.

    Used when a physician starts or stops counting (made active, removed).
    """
    items = (
        ConsensusVote.objects.filter(physician=physician, applies=True)
        .select_related("consensus_criterion")
        .order_by("conversation_id", "consensus_criterion_id")
    )
    count = 0
    with transaction.atomic():
        for vote in items:
            conversation_lock(vote.conversation_id)
            consensus_sync(conversation_id=vote.conversation_id, consensus_criterion=vote.consensus_criterion)
            count += 1
    return count
