"""/api/token/: a token for a username and password, rate limited per client address."""

from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import Throttled

from healthbench_web.throttles import TokenRequestThrottle


class TokenView(ObtainAuthToken):
    throttle_classes = [TokenRequestThrottle]

    def throttled(self, request, wait):
        raise Throttled(wait, detail=TokenRequestThrottle().refusal(wait))


token_view = TokenView.as_view()
