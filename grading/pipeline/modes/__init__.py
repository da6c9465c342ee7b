"""The grading modes, one module each, registered in MODES: the only table of them. A new mode
is a module that fills in grading.pipeline.modes.base.Mode, its line below, its name among
grading.models.GradingMode's choices and the migration those choices make
(tests/test_grading_mode_registry.py holds the table and the choices together).
"""

from __future__ import annotations

from grading.pipeline.modes import per_criterion, per_response
from grading.pipeline.modes.base import Mode

MODES: dict[str, Mode] = {
    mode.name: mode
    for mode in (
        per_criterion.MODE,
        per_response.MODE,
    )
}
# The mode of a run that names none (runs from before modes), and the one a criterion is
# asked again in alone when its entry of a several-criteria answer is unusable (a fallback).
DEFAULT = FALLBACK = per_criterion.NAME


def mode_of(name: str) -> Mode:
    """The mode named `name`; KeyError for a name that is none (spec_check refuses those first)."""
    return MODES[name or DEFAULT]
