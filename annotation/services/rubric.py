"""Rubric editing: criteria written in the editor, every change recorded in CriterionEdit."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from annotation.models import Assignment, Conversation, Criterion, CriterionEdit, Physician
from annotation.rubric_checks import positive_total
from annotation.rubric_versions import rubric_changed
from annotation.selectors.rubric import editor_criteria
from annotation.services.locking import conversation_lock
from annotation.services.quality_refresh import quality_changed


def criterion_snapshot(criterion: Criterion) -> dict:
    return {"text": criterion.text, "points": criterion.points, "axis": criterion.axis}


def criterion_tags(axis: str) -> list[str]:
    """Tags of an example criterion, in the order the public files use."""
    return ["level:example", f"axis:{axis}"]


def next_position(conversation_id: int) -> int:
    last = Criterion.objects.filter(conversation_id=conversation_id).aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


def criterion_create(
    *, physician: Physician, conversation: Conversation, text: str, points: int, axis: str
) -> Criterion:
    with transaction.atomic():
        conversation_lock(conversation.id)
        criterion = Criterion.objects.create(
            conversation=conversation,
            position=next_position(conversation.id),
            text=text,
            points=points,
            tags=criterion_tags(axis),
            level=Criterion.Level.EXAMPLE,
            axis=axis,
            author=physician,
            origin=Criterion.Origin.EDITOR,
        )
        rubric_changed([conversation.id])
        CriterionEdit.objects.create(
            criterion=criterion,
            conversation=conversation,
            physician=physician,
            action=CriterionEdit.Action.CREATE,
            after=criterion_snapshot(criterion),
        )
    return criterion


def criterion_update(*, physician: Physician, criterion: Criterion, text: str, points: int, axis: str) -> bool:
    """Change a criterion; False (and no audit row) when nothing changed."""
    before = criterion_snapshot(criterion)
    after = {"text": text, "points": points, "axis": axis}
    if before == after:
        return False
    with transaction.atomic():
        criterion.text, criterion.points, criterion.axis = text, points, axis
        criterion.tags = criterion_tags(axis)
        criterion.save(update_fields=["text", "points", "axis", "tags", "updated"])
        rubric_changed([criterion.conversation_id])
        CriterionEdit.objects.create(
            criterion=criterion,
            conversation_id=criterion.conversation_id,
            physician=physician,
            action=CriterionEdit.Action.UPDATE,
            before=before,
            after=after,
        )
    return True


def criterion_delete(*, physician: Physician, criterion: Criterion) -> None:
    with transaction.atomic():
        CriterionEdit.objects.create(
            criterion=criterion,
            conversation_id=criterion.conversation_id,
            physician=physician,
            action=CriterionEdit.Action.DELETE,
            before=criterion_snapshot(criterion),
        )
        criterion.delete()
        rubric_changed([criterion.conversation_id])


def rubric_submit(*, task: Assignment) -> None:
    """Mark a rubric task done; refuse a rubric that could not be scored."""
    points = editor_criteria(conversation=task.conversation, physician=task.physician).values_list("points", flat=True)
    if positive_total(points) <= 0:
        raise ValidationError("Add at least one criterion with positive points: a score is divided by their sum.")
    now = timezone.now()
    quality_changed()
    # A conditional update, so a double click or a second tab cannot submit twice.
    Assignment.objects.filter(id=task.id, status=Assignment.Status.OPEN).update(
        status=Assignment.Status.DONE, completed=now
    )
    task.status, task.completed = Assignment.Status.DONE, now
