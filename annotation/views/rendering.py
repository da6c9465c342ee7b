"""Rendering a page or, for htmx, one fragment of it (django-template-partials)."""

from django.http import HttpResponse
from django.shortcuts import render

from annotation.access import HtmxRequest


def wants_fragment(request: HtmxRequest) -> bool:
    # A history restore asks for the whole page: htmx had no snapshot of it to put back.
    return bool(request.htmx) and not request.htmx.history_restore_request


def render_page(
    request: HtmxRequest, template: str, context: dict, *, fragment: str, status: int = 200
) -> HttpResponse:
    """The whole page, or `template#fragment` when htmx asked (same context either way)."""
    name = f"{template}#{fragment}" if wants_fragment(request) else template
    return render(request, name, context, status=status)
