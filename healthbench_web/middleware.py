"""Request guards."""

import json
import logging

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest

from annotation.formats.validation import find_bad_text, may_hold_bad_text
from healthbench_web.errors import DATABASE_ERRORS, api_error, database_unavailable, is_api, page_not_found

logger = logging.getLogger(__name__)


class RejectNulBytes:
    """Answer 400 to a query string or JSON body holding a NUL character.

    PostgreSQL text cannot hold NUL, so a filter value with one would fail deep inside the
    database driver as a server error; no real client sends one.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        if "\x00" in request.path or any(
            "\x00" in key or any("\x00" in v for v in values) for key, values in request.GET.lists()
        ):
            return _refuse(request, "NUL bytes are not allowed in a URL.")
        if request.content_type == "application/json" and (b"\\u0000" in request.body or b"\x00" in request.body):
            return _refuse(request, "NUL characters are not allowed in a request body.")
        if request.content_type == "application/json":
            problem = _bad_json_text(request.body)
            if problem:
                return _refuse(request, problem)
        return self.get_response(request)


def _refuse(request: HttpRequest, reason: str) -> HttpResponse:
    """A 400 before any view: JSON on the API, as every API answer is."""
    return api_error(reason, 400) if is_api(request) else HttpResponseBadRequest(reason)


def _bad_json_text(body: bytes) -> str | None:
    """A lone surrogate cannot be stored or shown (UTF-8 has no encoding for it): name where it is."""
    text = body.decode("utf-8", errors="replace")
    if not may_hold_bad_text(text):
        return None
    try:
        bad = find_bad_text(json.loads(text))
    except (ValueError, RecursionError):
        return None  # not JSON: the API's parser answers that
    return f"field {bad[0] or '(the body)'}: {bad[1]}" if bad else None


class StyledNotFound:
    """A view's "not found" is the site's own 404 page, in development too.

    With DEBUG on, Django answers a view's Http404 with its technical page, which a physician
    trying the demo cannot use. Unknown addresses still get Django's list of URLs in
    development (nothing resolved, so no view raised), which helps whoever writes the URLs.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception):
        if isinstance(exception, Http404):
            return page_not_found(request, exception)
        return None


class DatabaseUnavailable:
    """A view that cannot reach the database answers 503 (the site's page, or JSON on the API)
    with Retry-After, as /healthz/ does, instead of a 500 and a traceback per request.

    Errors met outside a view (the session loaded in a middleware) reach handler500, which
    answers the same way (healthbench_web.errors.server_error).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception):
        if isinstance(exception, DATABASE_ERRORS):
            logger.warning("database unreachable on %s %s: %s", request.method, request.path, exception)
            return database_unavailable(request)
        return None
