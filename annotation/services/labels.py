"""Physician labels: met / not met for one (response, criterion), the meta-eval ground truth."""

from typing import cast

from django.db import IntegrityError, transaction

from annotation.models import Assignment, CantJudge, PhysicianLabel
from annotation.services.assignments import assignment_complete
from annotation.services.gold import gold_answer_label


def label_record(*, task: Assignment, met: bool, comment: str = "") -> None:
    """Record (or change) the physician's label for their labeling task and mark it done.

    An UPDATE first, then an INSERT when there was nothing to update: two statements on the
    hot path of labeling instead of update_or_create's read, savepoint and write.
    """
    item = {"physician_id": task.physician_id, "response_id": task.response_id, "criterion_id": task.criterion_id}
    values = {"met": met, "comment": comment.strip()}
    with transaction.atomic():
        if not PhysicianLabel.objects.filter(**item).update(**values):
            try:
                with transaction.atomic():
                    PhysicianLabel.objects.create(**item, **values)
            except IntegrityError:
                # The same physician's other tab labeled it first: theirs is replaced by this one.
                PhysicianLabel.objects.filter(**item).update(**values)
        # A label replaces a "can't judge" given to the same item before.
        CantJudge.objects.filter(**item, consensus_criterion=None).delete()
        # On a gold item, the first answer is kept for the physician's gold accuracy.
        gold_answer_label(
            physician_id=task.physician_id,
            response_id=cast(int, task.response_id),
            criterion_id=cast(int, task.criterion_id),
            met=met,
        )
        assignment_complete(assignment=task)
