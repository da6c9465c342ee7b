from django import template
from django.utils.safestring import SafeString, mark_safe

from healthbench_web.markdown_text import markdown_html

register = template.Library()


@register.filter
def markdown(text) -> SafeString:
    """A stored Markdown text as sanitised HTML (healthbench_web/markdown_text.py)."""
    return mark_safe(markdown_html(text))  # noqa: S308 - sanitised by nh3 with an allowlist
