"""The signed-in user and their physician profile in one query per request.

Every page reads `request.user` and, for its role, `user.physician`: with Django's
AuthenticationMiddleware that is two ORM queries (about 0.5 and 0.7 ms of CPU). This middleware
is Django's, except that a session made by ModelBackend (every login here) loads the user with
`select_related("physician")` through a query compiled once (healthbench_web/compiled_query.py).
The checks are Django's own, in the same order (django.contrib.auth.get_user): the backend named
in the session must still be configured, the user must be active, and the session's hash must
match the password's, else the session is flushed. Sessions of any other backend go through
Django's get_user unchanged.
"""

from functools import partial

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.middleware import AuthenticationMiddleware, auser
from django.contrib.auth.models import AnonymousUser
from django.utils.crypto import constant_time_compare
from django.utils.functional import SimpleLazyObject

from healthbench_web.compiled_query import CompiledQuery, sentinels

MODEL_BACKEND = f"{ModelBackend.__module__}.{ModelBackend.__qualname__}"

_user_with_physician = CompiledQuery(
    lambda user_id: get_user_model()._default_manager.select_related("physician").filter(pk=user_id),
    *sentinels(1),
)


def _model_backend_user(request, user_id):
    """ModelBackend.get_user, with the physician profile loaded in the same query."""
    user = _user_with_physician.first(user_id)
    return user if user is not None and ModelBackend().user_can_authenticate(user) else None


def get_user(request):
    """django.contrib.auth.get_user, with ModelBackend's user read by `_model_backend_user`."""
    if settings.AUTH_USER_MODEL != "auth.User":
        return auth.get_user(request)
    user = None
    try:
        # As django.contrib.auth._get_user_session_key.
        user_id = get_user_model()._meta.pk.to_python(request.session[SESSION_KEY])
        backend_path = request.session[BACKEND_SESSION_KEY]
    except KeyError:
        pass
    else:
        if backend_path in settings.AUTHENTICATION_BACKENDS:
            if backend_path != MODEL_BACKEND:
                return auth.get_user(request)
            user = _model_backend_user(request, user_id)
            # Verify the session (Django's code, unchanged).
            if hasattr(user, "get_session_auth_hash"):
                session_hash = request.session.get(HASH_SESSION_KEY)
                if not session_hash:
                    session_hash_verified = False
                else:
                    session_auth_hash = user.get_session_auth_hash()
                    session_hash_verified = constant_time_compare(session_hash, session_auth_hash)
                if not session_hash_verified:
                    if session_hash and any(
                        constant_time_compare(session_hash, fallback_auth_hash)
                        for fallback_auth_hash in user.get_session_auth_fallback_hash()
                    ):
                        request.session.cycle_key()
                        request.session[HASH_SESSION_KEY] = session_auth_hash
                    else:
                        request.session.flush()
                        user = None
    return user or AnonymousUser()


def _cached_user(request):
    if not hasattr(request, "_cached_user"):
        request._cached_user = get_user(request)
    return request._cached_user


class PhysicianAuthenticationMiddleware(AuthenticationMiddleware):
    """Django's AuthenticationMiddleware, with `request.user` read by `get_user` above."""

    def process_request(self, request):
        super().process_request(request)
        request.user = SimpleLazyObject(lambda: _cached_user(request))
        request.auser = partial(auser, request)
