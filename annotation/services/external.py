"""Linking an external physician (known only from an imported file) to an account.

An external physician has an anonymised id and labels but no login, so they never receive tasks.
Once a curator knows who they are, the labels can follow them to an account:
- an account without a physician profile becomes theirs (the profile gains the login);
- an account whose physician profile came from no file takes over the anonymised id and the labels,
  and the external profile goes away, unless both labelled the same item (one label per item).
The preview and the commit share one check, so what the curator saw is what happens.
"""

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext

from annotation.models import Physician, PhysicianLabel
from annotation.services.quality_refresh import quality_changed


@dataclass(frozen=True)
class LinkPlan:
    """What linking would do, read-only."""

    external: Physician
    user: User
    # The account's own physician profile, whose labels the external ones join; None: the account gains a profile.
    merge_into: Physician | None
    labels: int


def _other_work(physician: Physician) -> list[str]:
    """Work other than labels: imports create none, so its presence means this is no plain external."""
    found = []
    for name, related in (
        (gettext("tasks"), physician.assignments),
        (gettext("votes"), physician.votes),
        (gettext("can't-judge answers"), physician.cant_judge),
        (gettext("drafts"), physician.drafts),
    ):
        if related.exists():
            found.append(name)
    return found


def external_link_plan(*, external: Physician, user: User) -> LinkPlan:
    """Check a link and say what it would do; raises ValidationError with the curator's words."""
    if not external.is_external or external.role != Physician.Role.PHYSICIAN:
        raise ValidationError(gettext("%(external)s already has an account.") % {"external": external})
    labels = external.labels.count()
    try:
        profile: Physician | None = user.physician
    except Physician.DoesNotExist:
        profile = None
    if profile is None:
        return LinkPlan(external=external, user=user, merge_into=None, labels=labels)
    if profile.role != Physician.Role.PHYSICIAN:
        raise ValidationError(
            gettext("The account %(username)s is a %(role)s, not a physician.")
            % {"username": user.get_username(), "role": profile.role}
        )
    if profile.anonymized_id:
        raise ValidationError(
            gettext("The account %(username)s is already linked to the external physician %(external)s.")
            % {"username": user.get_username(), "external": profile}
        )
    other = _other_work(external)
    if other:
        raise ValidationError(
            gettext("%(external)s has %(work)s besides labels; link it in the admin instead.")
            % {"external": external, "work": ", ".join(other)}
        )
    items = set(external.labels.values_list("response_id", "criterion_id"))
    shared = len(items & set(profile.labels.values_list("response_id", "criterion_id")))
    if shared:
        raise ValidationError(
            gettext(
                "%(username)s and %(external)s both labelled %(shared)s of the same items;"
                " one physician gives one label per item, so they cannot be the same person."
            )
            % {"username": user.get_username(), "external": external, "shared": shared}
        )
    return LinkPlan(external=external, user=user, merge_into=profile, labels=labels)


def external_link(*, external: Physician, user: User) -> LinkPlan:
    """Link the external physician to the account, as `external_link_plan` said; all or nothing."""
    with transaction.atomic():
        external = Physician.objects.select_for_update().get(id=external.id)
        plan = external_link_plan(external=external, user=user)
        if plan.merge_into is None:
            external.user = user
            external.save(update_fields=["user"])
            return plan
        profile = Physician.objects.select_for_update().get(id=plan.merge_into.id)
        anonymized_id = external.anonymized_id
        PhysicianLabel.objects.filter(physician=external).update(physician=profile)
        quality_changed()
        external.delete()
        profile.anonymized_id = anonymized_id
        profile.save(update_fields=["anonymized_id"])
    return plan
