"""Conversations drafted in the browser (red-teaming), which then enter the rubric workflow."""

import uuid
from dataclasses import dataclass

from django.db import transaction

from annotation.models import Assignment, Conversation, Physician, Subset, SubsetMember
from annotation.services.assignments import least_loaded_physician
from annotation.task_kinds.rubric import KIND as RUBRIC

# Drafted conversations join `all`, like every imported one, and this custom subset.
DRAFT_SUBSET = "red-team"


@dataclass(frozen=True)
class DraftOutcome:
    conversation: Conversation
    rubric_task: Assignment | None


def conversation_draft_create(*, author: Physician | None, theme: str, messages: list[dict[str, str]]) -> DraftOutcome:
    """Store a drafted conversation (already validated) and give someone its rubric to write.

    A physician writes the rubric of their own conversation; one drafted by a curator goes to
    the least-loaded active physician (none when there is nobody to give it to).
    """
    with transaction.atomic():
        conversation = Conversation.objects.create(
            prompt_id=str(uuid.uuid4()),
            messages=[{"content": m["content"], "role": m["role"]} for m in messages],
            example_tags=[f"theme:{theme}"],
            theme=theme,
            author=author,
        )
        for name, kind in (("all", Subset.Kind.ALL), (DRAFT_SUBSET, Subset.Kind.CUSTOM)):
            subset, _ = Subset.objects.get_or_create(name=name, defaults={"kind": kind})
            SubsetMember.objects.create(subset=subset, conversation=conversation)
        writer = author if author is not None and author.role == Physician.Role.PHYSICIAN else least_loaded_physician()
        task = None
        if writer is not None:
            task = Assignment.objects.create(
                physician=writer, kind=RUBRIC.value, conversation=conversation, assigned_by=author
            )
    return DraftOutcome(conversation=conversation, rubric_task=task)
