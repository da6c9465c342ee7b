"""/healthz/: is this process able to serve? One JSON document with a state per dependency.

Checks the database always, the static files' manifest when the production storage needs one
(every page names its stylesheet through it, so without it every page is a 500), the cache when
it is Redis, and the Celery broker when it is a server (Redis, AMQP). Answers 200 when every
check passes, 503 otherwise, so that a container healthcheck or a load balancer takes the
process out of service when, say, Redis stopped.

An internal probe reaches the process over plain HTTP and by an address such as
127.0.0.1:8000, which the HTTPS redirect and ALLOWED_HOSTS would answer with a 301 or a 400.
HealthProbeMiddleware, first in MIDDLEWARE, answers the probe before either runs; the
document holds no data and names no host, only which check failed and its error's class
(the full error goes to the log, for the operator).
"""

import logging
import time
import uuid
from collections.abc import Callable

from django.conf import settings
from django.contrib.staticfiles.storage import ManifestFilesMixin, staticfiles_storage
from django.core.cache import caches
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from healthbench_web.celery import broker_ping

log = logging.getLogger(__name__)

PATH = "/healthz/"
TIMEOUT_SECONDS = 3


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return connection.vendor


# A file every page links: the manifest this process loaded must name it.
STATIC_PROBE = "style.css"


def _static_files() -> str | None:
    if not isinstance(staticfiles_storage, ManifestFilesMixin):
        return None  # development: files are served under their own names
    # The names this process loaded at start-up, not the file on disk: a manifest written after
    # the process started is not seen until it restarts. stored_name raises ValueError ("Missing
    # staticfiles manifest entry") just as the page would.
    staticfiles_storage.stored_name(STATIC_PROBE)
    return "manifest"


def _cache() -> str | None:
    if "RedisCache" not in settings.CACHES["default"]["BACKEND"]:
        return None  # the process's own memory: nothing that can be down
    cache = caches["strict"]  # the default alias would take an outage for a miss
    key, token = f"healthz:{uuid.uuid4().hex}", uuid.uuid4().hex
    cache.set(key, token, timeout=10)
    if cache.get(key) != token:
        raise RuntimeError("the cache did not return what was just stored")
    cache.delete(key)
    return "redis"


def _broker() -> str | None:
    # Folders on this machine (or this process' memory) give None: nothing that can be down.
    return broker_ping(TIMEOUT_SECONDS)


CHECKS: dict[str, Callable[[], str | None]] = {
    "database": _database,
    "static": _static_files,
    "cache": _cache,
    "broker": _broker,
}


def health_document() -> tuple[bool, dict]:
    checks: dict[str, dict] = {}
    for name, check in CHECKS.items():
        start = time.perf_counter()
        try:
            backend = check()
        except Exception as exc:
            log.warning("health check %s failed: %s: %s", name, type(exc).__name__, exc, extra={"check": name})
            checks[name] = {"ok": False, "error": type(exc).__name__}
            continue
        if backend is None:
            checks[name] = {"ok": True, "skipped": "not a separate server in this configuration"}
        else:
            checks[name] = {"ok": True, "backend": backend, "ms": round((time.perf_counter() - start) * 1000, 1)}
    healthy = all(check["ok"] for check in checks.values())
    return healthy, {"status": "ok" if healthy else "unhealthy", "checks": checks}


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    healthy, document = health_document()
    return JsonResponse(document, status=200 if healthy else 503)


class HealthProbeMiddleware:
    """Answers GET /healthz/ before the HTTPS redirect and the host check (see the module doc)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == PATH:
            return healthz(request)
        return self.get_response(request)
