from django import template
from django.utils.safestring import SafeString, mark_safe

from annotation.services.rendered_markdown import markdown_cached

register = template.Library()


@register.filter
def markdown(text) -> SafeString:
    """A stored Markdown text as sanitised HTML (healthbench_web/markdown_text.py), rendered once
    (annotation/services/rendered_markdown.py)."""
    return mark_safe(markdown_cached(text))  # noqa: S308 - sanitised by nh3 with an allowlist
