"""Physician labels: met / not met for one (response, criterion), the meta-eval ground truth."""

from django.db import transaction

from annotation.models import Assignment, PhysicianLabel
from annotation.services.assignments import assignment_complete


def label_record(*, task: Assignment, met: bool, comment: str = "") -> PhysicianLabel:
    """Record (or change) the physician's label for their labeling task and mark it done."""
    with transaction.atomic():
        label, _ = PhysicianLabel.objects.update_or_create(
            physician_id=task.physician_id,
            response_id=task.response_id,
            criterion_id=task.criterion_id,
            defaults={"met": met, "comment": comment.strip()},
        )
        assignment_complete(assignment=task)
    return label
