"""Error pages: every refusal is a page of the site, with its navigation, saying why and what to do.

Django's defaults are bare text ("403 Forbidden") or, in development, its debug pages; a
physician who meets one has no way back and no idea why.
"""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string


def _reason(exception: Exception | None) -> str:
    """Our own message from `PermissionDenied("...")`/`Http404("...")`; never a resolver's internals."""
    if exception is None or not exception.args:
        return ""
    first = exception.args[0]
    return first if isinstance(first, str) else ""


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    context = {"reason": _reason(exception)}
    return render(request, "errors/400.html", context, status=400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    context = {"reason": _reason(exception)}
    return render(request, "errors/403.html", context, status=403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    context = {"reason": _reason(exception), "path": request.path}
    return render(request, "errors/404.html", context, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    # No request context and no database: whatever failed may fail again while drawing the page.
    return HttpResponse(render_to_string("errors/500.html"), status=500)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    return render(request, "errors/403_csrf.html", {}, status=403)
