"""Rendering a page or, for htmx, one fragment of it (django-template-partials), with its Markdown
texts fetched, already rendered, in one query."""

from collections.abc import Iterator

from django.http import HttpResponse
from django.shortcuts import render

from annotation.access import HtmxRequest
from annotation.services.rendered_markdown import markdown_prefetch


def wants_fragment(request: HtmxRequest) -> bool:
    # A history restore asks for the whole page: htmx had no snapshot of it to put back.
    return bool(request.htmx) and not request.htmx.history_restore_request


def render_page(
    request: HtmxRequest, template: str, context: dict, *, fragment: str, status: int = 200
) -> HttpResponse:
    """The whole page, or `template#fragment` when htmx asked (same context either way)."""
    name = f"{template}#{fragment}" if wants_fragment(request) else template
    prefetch_markdown(context)
    return render(request, name, context, status=status)


def _shown_texts(context: dict) -> Iterator[object]:
    """The Markdown texts a task page shows, wherever its context holds them."""
    conversation = context.get("conversation")
    if conversation is not None:
        yield from (m.get("content") for m in conversation.messages if isinstance(m, dict))
    task = context.get("task")
    if task is not None and getattr(task, "response_id", None) is not None:
        yield task.response.text
    if task is not None and getattr(task, "criterion_id", None) is not None:
        yield task.criterion.text
    if (guideline := context.get("guideline")) is not None:
        yield guideline.text
    yield from (row.consensus_criterion.text for row in context.get("rows") or ())
    if (rubric := context.get("rubric")) is not None:
        yield from (criterion.text for criterion in rubric.criteria)
    yield from (reference.text for reference in context.get("references") or ())


def prefetch_markdown(context: dict) -> None:
    """Have every text the page shows rendered already, in one query (services.rendered_markdown)."""
    markdown_prefetch(_shown_texts(context))
