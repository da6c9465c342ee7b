""" "I can't judge this": a physician's answer on a labeling or voting item that is neither label nor vote.

It finishes the item for the physician, replaces any label or vote they gave it before, and
is kept apart from both, so the agreement metrics and the consensus count never see it.
"""

from django.db import transaction

from annotation.models import (
    Assignment,
    CantJudge,
    ConsensusCriterion,
    ConsensusVote,
    Conversation,
    Physician,
    PhysicianLabel,
)
from annotation.services.assignments import assignment_complete
from annotation.services.consensus import ballot_complete, consensus_sync
from annotation.services.locking import conversation_lock
from annotation.services.quality_refresh import quality_changed


def cant_judge_label(*, task: Assignment, reason: str, note: str = "") -> CantJudge:
    if task.response_id is None or task.criterion_id is None:
        raise ValueError(f"task {task.pk} is not a labeling task: it names no response and criterion")
    item = {"physician_id": task.physician_id, "response_id": task.response_id, "criterion_id": task.criterion_id}
    with transaction.atomic():
        PhysicianLabel.objects.filter(**item).delete()
        answer, _ = CantJudge.objects.update_or_create(
            physician_id=task.physician_id,
            response_id=task.response_id,
            criterion_id=task.criterion_id,
            consensus_criterion=None,
            defaults={"conversation_id": task.conversation_id, "reason": reason, "note": note.strip()},
        )
        assignment_complete(assignment=task)
    return answer


def cant_judge_vote(
    *,
    physician: Physician,
    conversation: Conversation,
    consensus_criterion: ConsensusCriterion,
    reason: str,
    note: str = "",
) -> CantJudge:
    with transaction.atomic():
        conversation_lock(conversation.id)
        ConsensusVote.objects.filter(
            physician=physician, conversation=conversation, consensus_criterion=consensus_criterion
        ).delete()
        answer, _ = CantJudge.objects.update_or_create(
            physician=physician,
            conversation=conversation,
            consensus_criterion=consensus_criterion,
            defaults={"reason": reason, "note": note.strip()},
        )
        quality_changed()
        # Taking back an "applies" may take the criterion below the number needed.
        consensus_sync(conversation_id=conversation.id, consensus_criterion=consensus_criterion)
        ballot_complete(physician=physician, conversation=conversation)
    return answer
