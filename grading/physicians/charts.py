"""Geometry of the physician page's inline SVG charts, in plain Python: the template only draws
what these return, so the page needs no JavaScript and no chart library.

* The agreement strip reuses the meta-eval's (grading/metaeval/charts.py): the other
  physicians' macro F1 as grey dots and a box, this physician as a diamond with its interval.
* Items per week: one bar per ISO week, its height the tasks done that week.
"""

from grading.metaeval.charts import COLOURS, Lane, strip_chart

BAR_WIDTH = 14
GAP = 4
HEIGHT = 80
LABEL = 14


def agreement_strip(others: list[float], value: float | None, low: float | None, high: float | None) -> dict:
    return strip_chart([Lane(physicians=others, value=value, low=low, high=high, colour=COLOURS[0])])


def weekly_bars(weeks: list[dict], kinds: list[str]) -> dict:
    """Bars for `weeks` (as grading.physicians.selectors.weekly_tasks gives them), oldest first."""
    totals = [sum(int(w[k]) for k in kinds) for w in weeks]
    top = max(totals, default=0) or 1
    bars = []
    for index, (week, total) in enumerate(zip(weeks, totals, strict=True)):
        height = round(HEIGHT * total / top, 1)
        bars.append(
            {
                "x": index * (BAR_WIDTH + GAP) + GAP,
                "y": round(HEIGHT - height, 1),
                "height": height,
                "total": total,
                "week": week["week"],
            }
        )
    return {
        "width": max(len(weeks), 1) * (BAR_WIDTH + GAP) + GAP,
        "height": HEIGHT + LABEL,
        "base": HEIGHT,
        "bars": bars,
        "top": top,
    }
