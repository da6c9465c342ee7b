"""API rate limits whose rates are settings (read on each request, so an operator's env var
and a test's override both apply), with refusals that say what the limit is and when to retry.

The counts live in the cache's "strict" alias (shared by every process with Redis), which
raises when Redis is down instead of forgetting. What a limit does then is its `fail_open`:

* run launches fail closed: a launch starts paid calls, so while its count cannot be kept it is
  refused with a 503 that says so (and with Redis down the broker usually is too);
* token requests fail open: they go on unlimited here, since failed passwords are also counted
  per account and per address in the database (django-axes), which locks guessing out anyway.

The run form (grading/pipeline/views.py) applies the same launch limit through `launch_refusal`.
"""

import logging
from typing import cast

from django.conf import settings
from django.core.cache import BaseCache, caches
from django.http import HttpRequest
from django.utils.connection import ConnectionProxy
from django.utils.translation import gettext
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from healthbench_web.forgiving_cache import ERRORS

log = logging.getLogger(__name__)


class LimitUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "limit_unavailable"


class _SettingRateThrottle(SimpleRateThrottle):
    setting = ""
    what = ""
    fail_open = False
    cache = cast(BaseCache, ConnectionProxy(caches, "strict"))

    def get_rate(self) -> str:
        return getattr(settings, self.setting)

    def get_cache_key(self, request: Request, view) -> str:
        user = getattr(request, "user", None)
        ident = f"user-{user.pk}" if user is not None and user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except ERRORS as exc:
            log.warning(
                "%s cannot be counted (%s: %s): %s",
                self.setting,
                type(exc).__name__,
                exc,
                "allowed" if self.fail_open else "refused",
                extra={"limit": self.setting},
            )
            if self.fail_open:
                return True
            raise LimitUnavailable(
                gettext(
                    "The limit on %(what)s (%(setting)s) cannot be checked right now: the cache that "
                    "keeps its counts is unreachable. Try again in a minute; /healthz/ says what is down."
                )
                % {"what": self.what, "setting": self.setting}
            ) from None

    def refusal(self, wait: float | None) -> str:
        retry = gettext(" Try again in %(seconds)s s.") % {"seconds": int(wait) + 1} if wait is not None else ""
        limit = gettext("Too many %(what)s: the limit is %(rate)s (%(setting)s).")
        return limit % {"what": self.what, "rate": self.get_rate(), "setting": self.setting} + retry


class RunLaunchThrottle(_SettingRateThrottle):
    """Per user: launching a run starts paid LLM calls."""

    scope = "run_launch"
    setting = "API_RUN_LAUNCH_RATE"
    what = "run launches"


class TokenRequestThrottle(_SettingRateThrottle):
    """Per client address: each token request checks a password."""

    scope = "token"
    setting = "API_TOKEN_RATE"
    what = "token requests"
    fail_open = True


def launch_refusal(request: HttpRequest) -> tuple[int, str] | None:
    """For a launch outside the API (the run form): None when the launch limit allows it (and
    counts it), else the status and the sentence to show. The API applies RunLaunchThrottle
    itself; both count in the same place, so a user has one limit across both."""
    throttle = RunLaunchThrottle()
    try:
        # A Django request has all that the throttle reads of a DRF one (user, META).
        if throttle.allow_request(cast(Request, request), None):
            return None
    except LimitUnavailable as exc:
        return exc.status_code, str(exc.detail)
    return status.HTTP_429_TOO_MANY_REQUESTS, throttle.refusal(throttle.wait())
