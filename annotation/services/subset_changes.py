"""Changing a subset's members with a preview, a confirmation and an undo.

A change is first planned (what would be added and removed, nothing written), shown to the
curator, and applied only when they confirm the very plan they saw: the plan's fingerprint
travels with the confirmation, and a plan that no longer matches the subset is refused. Every
applied change is logged, so the last one can be undone until the subset is next frozen.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from annotation.models import Physician, Subset, SubsetChange, SubsetMember
from healthbench_web.bulk import db_now, insert_rows


class SubsetChanged(Exception):
    """The subset is no longer what the plan was made from: preview again."""


class NothingToUndo(Exception):
    pass


@dataclass(frozen=True)
class SubsetPlan:
    action: str
    added: tuple[int, ...]
    removed: tuple[int, ...]

    @property
    def fingerprint(self) -> str:
        """Names this exact change, so a confirmation applies what was previewed and nothing else."""
        text = f"{self.action}|{','.join(map(str, self.added))}|{','.join(map(str, self.removed))}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def destructive(self) -> bool:
        return bool(self.removed)

    @property
    def empty(self) -> bool:
        return not self.added and not self.removed


def _present(subset: Subset) -> list[int]:
    return list(SubsetMember.objects.filter(subset=subset).order_by("id").values_list("conversation_id", flat=True))


def subset_plan_set(*, subset: Subset, conversation_ids: Iterable[int], action: str) -> SubsetPlan:
    """Make the members exactly these conversations: members that stay keep their place."""
    wanted = list(dict.fromkeys(conversation_ids))
    present = _present(subset)
    keep, have = set(wanted), set(present)
    return SubsetPlan(
        action,
        added=tuple(cid for cid in wanted if cid not in have),
        removed=tuple(cid for cid in present if cid not in keep),
    )


def subset_plan_add(*, subset: Subset, conversation_ids: Iterable[int], action: str) -> SubsetPlan:
    have = set(_present(subset))
    return SubsetPlan(
        action, added=tuple(cid for cid in dict.fromkeys(conversation_ids) if cid not in have), removed=()
    )


def subset_plan_remove(*, subset: Subset, conversation_ids: Iterable[int], action: str) -> SubsetPlan:
    drop = set(conversation_ids)
    return SubsetPlan(action, added=(), removed=tuple(cid for cid in _present(subset) if cid in drop))


def subset_change_apply(*, subset: Subset, plan: SubsetPlan, by: Physician | None = None) -> SubsetChange:
    """Apply a planned change and log it; raises SubsetChanged when the plan no longer fits."""
    with transaction.atomic():
        # Lock the subset: two curators confirming at once apply one after the other, and the
        # second finds the members changed under its plan.
        subset = Subset.objects.select_for_update().get(pk=subset.pk)
        members = dict(SubsetMember.objects.filter(subset=subset).values_list("conversation_id", "id"))
        if any(cid in members for cid in plan.added) or any(cid not in members for cid in plan.removed):
            raise SubsetChanged(f"{subset.name} changed since this preview")
        removed = [[members[cid], cid] for cid in plan.removed]
        SubsetMember.objects.filter(id__in=[member_id for member_id, _ in removed]).delete()
        now = db_now()
        insert_rows(SubsetMember, SubsetMember.INSERT_COLUMNS, [(subset.id, cid, now) for cid in plan.added])
        return SubsetChange.objects.create(
            subset=subset, action=plan.action, added=list(plan.added), removed=removed, by=by
        )


def undoable_change(subset: Subset) -> SubsetChange | None:
    """The subset's last change, if it is not undone and the subset was not frozen after it."""
    change = subset.changes.filter(undone__isnull=True).order_by("-id").first()
    if change is None:
        return None
    latest = subset.versions.order_by("-number").values_list("frozen", flat=True).first()
    if latest is not None and latest >= change.created:
        return None
    return change


def subset_change_undo(*, subset: Subset) -> SubsetChange:
    """Undo the last change: take out what it added, put back what it removed, in their places."""
    with transaction.atomic():
        subset = Subset.objects.select_for_update().get(pk=subset.pk)
        change = undoable_change(subset)
        if change is None:
            raise NothingToUndo(
                gettext("%(name)s has no change to undo since it was last frozen") % {"name": subset.name}
            )
        SubsetMember.objects.filter(subset=subset, conversation_id__in=change.added).delete()
        present = set(SubsetMember.objects.filter(subset=subset).values_list("conversation_id", flat=True))
        back = [(member_id, cid) for member_id, cid in change.removed if cid not in present]
        taken = set(
            SubsetMember.objects.filter(id__in=[member_id for member_id, _ in back]).values_list("id", flat=True)
        )
        now = timezone.now()
        # The old member ids put each conversation back where it stood (export follows member
        # order); an id taken meanwhile by a change made outside this log goes to the end.
        SubsetMember.objects.bulk_create(
            [
                SubsetMember(
                    id=None if member_id in taken else member_id, subset=subset, conversation_id=cid, added=now
                )
                for member_id, cid in back
            ]
        )
        change.undone = timezone.now()
        change.save(update_fields=["undone"])
    return change
