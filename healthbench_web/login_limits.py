"""Failed logins are limited per account and per client address (django-axes, counted in the
database, so the limit holds while Redis is down): after LOGIN_FAILURE_LIMIT failures, that
account, and separately that address, cannot log in for LOGIN_LOCKOUT_MINUTES after the last
failure, even with the right password. The login page and /api/token/ share the count.

Axes is configured in settings; this module gives it the client's address (the same one the
API throttles use, honouring API_NUM_PROXIES) and the refusal: a styled page saying when to try
again, or for the API a JSON 429.
"""

import math
from collections.abc import Mapping

from django.conf import settings
from django.db.models import Max, Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import ngettext


def client_address(request: HttpRequest) -> str:
    """REMOTE_ADDR, or behind API_NUM_PROXIES proxies the address they appended to
    X-Forwarded-For (trusting the header without a proxy would let anyone pick their own)."""
    remote = request.META.get("REMOTE_ADDR", "")
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    proxies = settings.API_NUM_PROXIES
    if not proxies or not forwarded:
        return remote
    addresses = forwarded.split(",")
    return addresses[-min(proxies, len(addresses))].strip()


def minutes_left(username: str, address: str) -> int:
    """Minutes until the lockout of this account or address ends (at least 1)."""
    from axes.models import AccessAttempt

    last = AccessAttempt.objects.filter(Q(username=username) | Q(ip_address=address)).aggregate(
        last=Max("attempt_time")
    )["last"]
    if last is None:
        return settings.LOGIN_LOCKOUT_MINUTES
    ends = last + settings.AXES_COOLOFF_TIME
    return max(1, math.ceil((ends - timezone.now()).total_seconds() / 60))


def refusal(request: HttpRequest, credentials: Mapping | None) -> str:
    username = str((credentials or {}).get("username") or request.POST.get("username", ""))
    minutes = minutes_left(username, client_address(request))
    return ngettext(
        "Too many failed logins for this account or from this address: logging in is paused. "
        "Try again in %(minutes)s minute; a curator can lift the pause sooner (the admin's Access attempts).",
        "Too many failed logins for this account or from this address: logging in is paused. "
        "Try again in %(minutes)s minutes; a curator can lift the pause sooner (the admin's Access attempts).",
        minutes,
    ) % {"minutes": minutes}


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict | None = None
) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the refusal as a page of the site (429), or as JSON for the API."""
    reason = refusal(request, credentials)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": reason}, status=429)
    return render(request, "registration/locked_out.html", {"reason": reason}, status=429)
