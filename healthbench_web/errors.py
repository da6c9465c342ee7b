"""Error pages: every refusal is a page of the site, with its navigation, saying why and what to do.

Django's defaults are bare text ("403 Forbidden") or, in development, its debug pages; a
physician who meets one has no way back and no idea why.
"""

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.translation import gettext

# What a request that met a database outage answers; the client may try again after this long.
DATABASE_RETRY_AFTER_SECONDS = 30
DATABASE_DOWN = (
    "The database cannot be reached right now, so this request could not be answered. "
    f"Try again in {DATABASE_RETRY_AFTER_SECONDS} seconds."
)
DATABASE_ERRORS = (OperationalError, InterfaceError)


def _reason(exception: Exception | None) -> str:
    """Our own message from `PermissionDenied("...")`/`Http404("...")`; never a resolver's internals."""
    if exception is None or not exception.args:
        return ""
    first = exception.args[0]
    return first if isinstance(first, str) else ""


def is_api(request: HttpRequest) -> bool:
    """Whether the request is the API's, whose every answer is JSON (the schema's `Error`)."""
    return request.path.startswith("/api/")


def api_error(detail: str, status: int) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return api_error(_reason(exception) or "The request is not valid.", 400)
    context = {"reason": _reason(exception)}
    return render(request, "errors/400.html", context, status=400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return api_error(_reason(exception) or "You do not have permission to do this.", 403)
    context = {"reason": _reason(exception)}
    return render(request, "errors/403.html", context, status=403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        no_operation = gettext("No API operation at %(path)s: see /api/schema/.") % {"path": request.path}
        return api_error(_reason(exception) or no_operation, 404)
    context = {"reason": _reason(exception), "path": request.path}
    return render(request, "errors/404.html", context, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    # Called while the exception is being handled: a database outage met outside a view (loading
    # the session, in a middleware) is a 503 too.
    if isinstance(sys.exc_info()[1], DATABASE_ERRORS):
        return database_unavailable(request)
    if is_api(request):
        return api_error("The server failed while answering; the error has been logged. Try again later.", 500)
    # No request context and no database: whatever failed may fail again while drawing the page.
    return HttpResponse(render_to_string("errors/500.html"), status=500)


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """503 for a request that could not reach the database: JSON on the API, the site's page elsewhere.

    Drawn without the request context, which would read the session and the user from the
    database that just failed.
    """
    if is_api(request):
        response: HttpResponse = api_error(DATABASE_DOWN, 503)
    else:
        response = HttpResponse(render_to_string("errors/503_database.html", {"reason": DATABASE_DOWN}), status=503)
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    return render(request, "errors/403_csrf.html", {}, status=403)
