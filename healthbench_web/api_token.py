"""/api/token/: a token for a username and password. Limited per client address (API_TOKEN_RATE),
and failed passwords count towards the same per-account and per-address lockout as the login
page (healthbench_web/login_limits.py), which answers here as a JSON 429."""

from collections.abc import Mapping

from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from healthbench_web.login_limits import refusal
from healthbench_web.throttles import TokenRequestThrottle


class TokenView(ObtainAuthToken):
    throttle_classes = [TokenRequestThrottle]

    def throttled(self, request, wait):
        raise Throttled(wait, detail=TokenRequestThrottle().refusal(wait))

    def post(self, request: Request, *args, **kwargs) -> Response:
        try:
            return super().post(request, *args, **kwargs)
        except ValidationError:
            # django-axes marks the request when it refused the password check (locked out, or
            # this failure reached the limit); otherwise it is a plain wrong password.
            if getattr(request, "axes_locked_out", False):
                data = request.data if isinstance(request.data, Mapping) else {}
                return Response({"detail": refusal(request._request, data)}, status=429)
            raise


token_view = TokenView.as_view()
