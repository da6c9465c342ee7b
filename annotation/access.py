"""Access helpers: every object a view shows is looked up through one of these.

They check the user's role and return the object or raise, so no view can forget a check.
A physician reaches a conversation only through their own assignment for it, and a lookup
that misses (someone else's task, a criterion of another author) is a 404, not a 403, so
ids cannot be probed. `_rw` variants add the write check and raise PermissionDenied.
"""

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from django_htmx.middleware import HtmxDetails

from annotation.models import Assignment, ConsensusCriterion, Conversation, Criterion, GoldItem, Physician, Subset
from annotation.selectors.tasks import wrote_rubric

WORKING = (Physician.Status.TRIAL, Physician.Status.ACTIVE)


class HtmxRequest(HttpRequest):
    """A request after HtmxMiddleware; `user` is a User once login_required has passed."""

    htmx: HtmxDetails
    user: User


def physician_for(user: User | AnonymousUser) -> Physician | None:
    if not user.is_authenticated:
        return None
    try:
        return user.physician
    except Physician.DoesNotExist:
        return None


def role_of(user: User | AnonymousUser) -> str | None:
    """The user's role; staff without a profile act as curators."""
    physician = physician_for(user)
    if physician is not None:
        if physician.status == Physician.Status.REMOVED:
            return None
        return physician.role
    if user.is_authenticated and user.is_staff:
        return Physician.Role.CURATOR
    return None


def require_role(request: HttpRequest, *roles: str) -> str:
    role = role_of(request.user)
    if role not in roles:
        raise PermissionDenied("This page is not open to your role.")
    return role


def require_curator(request: HttpRequest) -> Physician | None:
    """A curator, who may write; returns their profile (None for staff without one)."""
    require_role(request, Physician.Role.CURATOR)
    return physician_for(request.user)


def require_staff_reader(request: HttpRequest) -> str:
    """Curators and researchers read the programme's pages; only curators write on them."""
    return require_role(request, Physician.Role.CURATOR, Physician.Role.RESEARCHER)


def require_working_physician(request: HttpRequest) -> Physician:
    """A physician on trial or active: the only people who do tasks."""
    require_role(request, Physician.Role.PHYSICIAN)
    physician = physician_for(request.user)
    if physician is None:  # require_role passed, so only a physician row deleted meanwhile
        raise PermissionDenied
    if physician.status not in WORKING:
        raise PermissionDenied("Your account is not yet open for tasks.")
    return physician


def get_conversation_for_reader(request: HttpRequest, code) -> Conversation:
    """Curators and researchers read every conversation; physicians use their task pages."""
    require_staff_reader(request)
    try:
        return Conversation.objects.get(code=code)
    except (Conversation.DoesNotExist, ValueError):
        raise Http404("No such conversation") from None


def get_task(request: HttpRequest, code, kind: str) -> Assignment:
    """The signed-in physician's own task of `kind` for conversation `code`."""
    physician = require_working_physician(request)
    try:
        task = (
            Assignment.objects.select_related("conversation")
            .exclude(status__in=Assignment.INACTIVE)
            .get(physician=physician, kind=kind, conversation__code=code)
        )
    except (Assignment.DoesNotExist, ValueError):
        raise Http404("You have no such task") from None
    task.physician = physician  # already loaded: spare the join
    return task


def get_rubric_task_rw(request: HttpRequest, code) -> Assignment:
    task = get_task(request, code, Assignment.Kind.RUBRIC)
    if task.is_done:
        raise PermissionDenied("This rubric was submitted and can no longer be changed.")
    return task


def get_criterion_for_author_rw(request: HttpRequest, code, criterion_id: int) -> tuple[Assignment, Criterion]:
    """A criterion the physician wrote on a rubric they are still writing."""
    task = get_rubric_task_rw(request, code)
    try:
        criterion = Criterion.objects.get(
            id=criterion_id, conversation=task.conversation, author=task.physician, level=Criterion.Level.EXAMPLE
        )
    except Criterion.DoesNotExist:
        raise Http404("No such criterion in your rubric") from None
    return task, criterion


def get_consensus_criterion_for_task(task: Assignment, code) -> ConsensusCriterion:
    """A catalogue entry that fits the theme of the task's conversation."""
    try:
        return ConsensusCriterion.objects.get(code=code, theme=task.conversation.theme)
    except (ConsensusCriterion.DoesNotExist, ValueError):
        raise Http404("No such consensus criterion for this conversation") from None


def get_label_task(request: HttpRequest, code) -> Assignment:
    """The physician's own labeling item, withdrawn ones included so the page can say why.

    The caller must check `label_conflict(task)` before showing the item: a physician never
    labels responses against a rubric they wrote.
    """
    physician = require_working_physician(request)
    try:
        task = (
            Assignment.objects.select_related("conversation", "response", "criterion")
            .exclude(status=Assignment.Status.CANCELLED)
            .get(code=code, physician=physician, kind=Assignment.Kind.LABEL)
        )
    except (Assignment.DoesNotExist, ValueError):
        raise Http404("You have no such labeling item") from None
    task.physician = physician
    return task


def label_conflict(task: Assignment) -> bool:
    """Whether the item may not be labeled by its physician: withdrawn, or on a rubric they wrote."""
    if task.status == Assignment.Status.WITHDRAWN:
        return True
    return wrote_rubric(physician=task.physician, conversation=task.conversation)


def get_physician_for_curator_rw(request: HttpRequest, code) -> tuple[Physician | None, Physician]:
    """(the curator acting, the physician they act on)."""
    curator = require_curator(request)
    try:
        physician = Physician.objects.select_related("user").get(code=code, role=Physician.Role.PHYSICIAN)
    except (Physician.DoesNotExist, ValueError):
        raise Http404("No such physician") from None
    return curator, physician


def require_drafter(request: HttpRequest) -> Physician | None:
    """Physicians (trial or active) and curators draft conversations; returns the author."""
    role = require_role(request, Physician.Role.PHYSICIAN, Physician.Role.CURATOR)
    if role == Physician.Role.PHYSICIAN:
        return require_working_physician(request)
    return physician_for(request.user)


def get_subset_for(request: HttpRequest, name: str, *roles: str) -> Subset:
    """A subset by name, for the given roles (curators when none are named)."""
    require_role(request, *(roles or (Physician.Role.CURATOR,)))
    try:
        return Subset.objects.get(name=name)
    except Subset.DoesNotExist:
        raise Http404("No such subset") from None


def get_gold_item_for_curator(request: HttpRequest, gold_id: int) -> GoldItem:
    """A gold item, for curators only: its known answer is never shown to anyone else."""
    require_curator(request)
    related = ("conversation", "response", "criterion", "consensus_criterion")
    try:
        return GoldItem.objects.select_related(*related).get(id=gold_id)
    except GoldItem.DoesNotExist:
        raise Http404("No such gold item") from None
