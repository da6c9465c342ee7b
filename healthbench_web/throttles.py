"""API rate limits whose rates are settings (read on each request, so an operator's env var
and a test's override both apply), with refusals that say what the limit is and when to retry."""

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle


class _SettingRateThrottle(SimpleRateThrottle):
    setting = ""
    what = ""

    def get_rate(self) -> str:
        return getattr(settings, self.setting)

    def get_cache_key(self, request: Request, view) -> str:
        user = getattr(request, "user", None)
        ident = f"user-{user.pk}" if user is not None and user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def refusal(self, wait: float | None) -> str:
        retry = f" Try again in {int(wait) + 1} s." if wait is not None else ""
        return f"Too many {self.what}: the limit is {self.get_rate()} ({self.setting}).{retry}"


class RunLaunchThrottle(_SettingRateThrottle):
    """Per user: launching a run starts paid LLM calls."""

    scope = "run_launch"
    setting = "API_RUN_LAUNCH_RATE"
    what = "run launches"


class TokenRequestThrottle(_SettingRateThrottle):
    """Per client address: each token request checks a password, so this bounds guessing."""

    scope = "token"
    setting = "API_TOKEN_RATE"
    what = "token requests"
