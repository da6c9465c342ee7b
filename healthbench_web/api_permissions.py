"""API permissions by role, the same rules as the pages."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from annotation.access import role_of
from annotation.models import Physician

CURATOR = Physician.Role.CURATOR
RESEARCHER = Physician.Role.RESEARCHER


class ReadersOnly(BasePermission):
    """Curators and researchers read; only curators write (physicians use their task pages)."""

    message = "This endpoint is open to curators and researchers; only curators change data."

    def has_permission(self, request, view) -> bool:
        role = role_of(request.user)
        if request.method in SAFE_METHODS:
            return role in (CURATOR, RESEARCHER)
        return role == CURATOR


class ResearchersWrite(BasePermission):
    """Curators and researchers read and launch (runs); physicians have no access."""

    message = "This endpoint is open to curators and researchers."

    def has_permission(self, request, view) -> bool:
        return role_of(request.user) in (CURATOR, RESEARCHER)
