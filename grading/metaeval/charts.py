"""Geometry of the report's inline SVG strips: physicians' values as dots and a box, the grader marked.

Pure Python: the template only draws what this returns, so the page needs no JavaScript and
no chart library. One lane per run, all on a shared 0..1 axis.
"""

from dataclasses import dataclass

import numpy as np

WIDTH = 220
PAD = 10
LANE = 22
AXIS = 14
# Colours of successive runs' markers, readable on white and apart from the grey dots.
COLOURS = ("#1f6feb", "#b42318", "#067647", "#9a6700", "#8250df", "#bf3989")


@dataclass(frozen=True)
class Lane:
    physicians: list[float]
    value: float | None
    low: float | None
    high: float | None
    colour: str


def _x(value: float) -> float:
    return round(PAD + value * (WIDTH - 2 * PAD), 1)


def strip_chart(lanes: list[Lane]) -> dict:
    """Shapes for `lanes`, top to bottom, with ticks at 0, 0.25, ..., 1 along the bottom."""
    drawn = []
    for index, lane in enumerate(lanes):
        mid = index * LANE + LANE / 2
        values = sorted(lane.physicians)
        # A fixed zig-zag spreads tied values apart and draws the same chart every time.
        dots = [{"x": _x(v), "y": round(mid + (i % 5 - 2) * 2.2, 1)} for i, v in enumerate(values)]
        box = None
        if len(values) >= 3:
            q1, median, q3 = np.percentile(values, [25, 50, 75]).tolist()
            box = {"x": _x(q1), "width": round(_x(q3) - _x(q1), 1), "median": _x(median)}
        grader = None
        if lane.value is not None:
            x = _x(lane.value)
            grader = {
                "low": _x(lane.low if lane.low is not None else lane.value),
                "high": _x(lane.high if lane.high is not None else lane.value),
                # A diamond, so the grader stands apart from the round physician dots.
                "points": f"{x},{mid - 6} {x + 5},{mid} {x},{mid + 6} {x - 5},{mid}",
            }
        top = index * LANE + 3
        drawn.append(
            {
                "top": top,
                "bottom": top + LANE - 6,
                "height": LANE - 6,
                "mid": mid,
                "dots": dots,
                "box": box,
                "grader": grader,
                "colour": lane.colour,
            }
        )
    axis_y = len(lanes) * LANE
    ticks = [{"x": _x(t), "label": f"{t:g}"} for t in (0, 0.25, 0.5, 0.75, 1)]
    return {
        "width": WIDTH,
        "height": axis_y + AXIS,
        "axis_y": axis_y,
        "label_y": axis_y + AXIS - 3,
        "lanes": drawn,
        "ticks": ticks,
    }
