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
from annotation.task_kinds import kind_of
from annotation.task_kinds.base import TaskKind
from annotation.task_kinds.rubric import KIND as RUBRIC

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


def get_task(request: HttpRequest, code, kind: TaskKind) -> Assignment:
    """The signed-in physician's own task of `kind` that its page at `code` shows (the kind's
    `own_task`: by the conversation's code, or the task's own for labeling). A task of a kind
    with a `conflict` rule must be checked with `task_conflict` before it is shown."""
    physician = require_working_physician(request)
    try:
        task = kind.own_task(physician, code)
    except (Assignment.DoesNotExist, ValueError):
        raise Http404(kind.missing) from None
    task.physician = physician  # already loaded: spare the join
    return task


def get_task_rw(request: HttpRequest, code, kind: TaskKind) -> Assignment:
    """The physician's own task, refused when its kind closes it (a submitted rubric)."""
    task = get_task(request, code, kind)
    if (closed := kind.closed(task)) is not None:
        raise PermissionDenied(closed)
    return task


def task_conflict(task: Assignment) -> bool:
    """Whether the task may not be done by its physician although they hold it (its kind's
    `conflict`: a labeling item withdrawn, or on a rubric they wrote)."""
    return kind_of(task.kind).conflict(task)


def get_criterion_for_author_rw(request: HttpRequest, code, criterion_id: int) -> tuple[Assignment, Criterion]:
    """A criterion the physician wrote on a rubric they are still writing."""
    task = get_task_rw(request, code, RUBRIC)
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
