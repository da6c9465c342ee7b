"""Access helpers: every object a view shows is looked up through one of these.

They check the user's role and return the object or raise, so no view can forget a check.
"""

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest

from annotation.models import Conversation, Physician


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


def get_conversation_for_reader(request: HttpRequest, code) -> Conversation:
    """Curators and researchers read every conversation; physicians use their task pages."""
    require_role(request, Physician.Role.CURATOR, Physician.Role.RESEARCHER)
    try:
        return Conversation.objects.get(code=code)
    except (Conversation.DoesNotExist, ValueError):
        raise Http404("No such conversation") from None
