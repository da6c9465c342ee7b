"""Vetting physicians: applicant -> trial -> active -> removed, and what removal takes back."""

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext

from annotation.models import Criterion, Physician
from annotation.services.assignments import assignments_cancel_open
from annotation.services.consensus import consensus_recount
from annotation.services.quality_refresh import quality_changed

Status = Physician.Status
TRANSITIONS: dict[str, tuple[str, ...]] = {
    Status.APPLICANT: (Status.TRIAL, Status.REMOVED),
    Status.TRIAL: (Status.ACTIVE, Status.REMOVED),
    Status.ACTIVE: (Status.REMOVED,),
    Status.REMOVED: (),
}


@dataclass(frozen=True)
class VettingOutcome:
    physician: Physician
    recounted: int = 0
    flagged: int = 0
    cancelled: int = 0


def physician_status_set(*, physician: Physician, status: str) -> VettingOutcome:
    """Move a physician to `status`. Removal keeps their work but takes it out of what counts:

    their 'applies' votes stop counting (criteria attached by votes that fall below the
    threshold are detached), their criteria are flagged for review, their open tasks are
    cancelled; the meta-eval leaves out labels of removed physicians by their status.
    """
    with transaction.atomic():
        # Locked, so two curators clicking at once cannot both apply a transition from one state.
        locked = Physician.objects.select_for_update().get(id=physician.id)
        if status not in TRANSITIONS[locked.status]:
            raise ValidationError(
                gettext("A physician who is %(current)s cannot become %(status)s.")
                % {"current": locked.status, "status": status}
            )
        counted_before = locked.status == Status.ACTIVE
        locked.status = status
        locked.save(update_fields=["status"])
        if status == Status.REMOVED:
            quality_changed()  # their work leaves the physician quality figures
        flagged = cancelled = recounted = 0
        if status == Status.REMOVED:
            flagged = Criterion.objects.filter(author=locked).update(flagged_for_review=True)
            cancelled = assignments_cancel_open(physician=locked)
        if counted_before != (status == Status.ACTIVE):
            recounted = consensus_recount(physician=locked)
        outcome = VettingOutcome(physician=locked, recounted=recounted, flagged=flagged, cancelled=cancelled)
    physician.status = locked.status
    return outcome
