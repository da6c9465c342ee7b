"""Ideal responses written in the editor, with what the physician was shown while writing."""

from django.db import transaction

from annotation.models import Assignment, IdealResponse
from annotation.services.assignments import assignment_complete


def ideal_response_save(*, task: Assignment, text: str) -> IdealResponse:
    """Save the physician's ideal response for their task (again replaces it) and mark the task done.

    The condition and the reference texts come from the task, not from the form: they record
    what the page showed, which the physician cannot choose.
    """
    with_reference = task.condition == IdealResponse.Condition.WITH_REFERENCE
    references = [r.text for r in task.reference_responses.order_by("id")] if with_reference else []
    with transaction.atomic():
        ideal, _ = IdealResponse.objects.update_or_create(
            conversation_id=task.conversation_id,
            author_id=task.physician_id,
            from_dataset=False,
            defaults={
                "text": text,
                "condition": IdealResponse.Condition.WITH_REFERENCE
                if with_reference
                else IdealResponse.Condition.NO_REFERENCE,
                "reference_responses": references,
            },
        )
        assignment_complete(assignment=task)
    return ideal
