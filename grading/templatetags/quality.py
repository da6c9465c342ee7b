"""Filters of the physician quality pages (healthbench_web/templates/physicians/)."""

from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

MEASURES = {"agreement": "Agreement (macro F1)", "active_time": "Active time", "cant_judge": "Can't-judge rate"}


@register.filter
def figure(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:.{int(digits)}f}"


@register.filter
def measure_name(measure: str) -> str:
    return MEASURES.get(measure, measure)


@register.filter
def measure_value(value: float, measure: str) -> str:
    if measure == "active_time":
        return f"{value:.0f} s"
    if measure == "cant_judge":
        return f"{100 * value:.1f}%"
    return f"{value:.3f}"


@register.filter
def item(mapping: dict, key: str):
    return mapping.get(key, "")


@register.filter
def estimate(e: dict | None, digits: int = 3) -> SafeString:
    """A figure with its interval in brackets, or a dash."""
    # Numbers formatted by `figure` (digits, a sign, a point or a dash) need no escaping: the
    # page's 262 rows call this a thousand times, and format_html's escaping is most of its cost.
    if not e or e.get("value") is None:
        return mark_safe('<span class="muted">–</span>')
    if e.get("low") is None:
        return mark_safe(figure(e["value"], digits))  # noqa: S308
    value, low, high = figure(e["value"], digits), figure(e["low"], digits), figure(e["high"], digits)
    return mark_safe(f'{value} <span class="muted">({low}–{high})</span>')  # noqa: S308
