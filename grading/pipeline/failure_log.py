"""Log each class of endpoint failure once per run, with the run's name and one example.

A grader that times out does so thousands of times in a run; one log line per failure would
bury everything else, none would leave the operator guessing. So the first failure of each
class (HTTP status, timeout, refused connection, unreadable answer, a grader's refusal, an answer
cut off, ...) in a run is logged
at WARNING, and the rest are counted on the run's page. "Once" is kept in the cache with an
atomic add, so it holds across processes when the cache is Redis, and per process otherwise.
"""

import logging
import re

from django.core.cache import cache

from grading.models import Run
from grading.pipeline.provider_errors import UNGRADABLE

log = logging.getLogger(__name__)

REMEMBER_SECONDS = 7 * 24 * 3600
_HTTP = re.compile(r"^HTTP (\d{3})\b")
_CLASSES = (
    ("no answer within", "timeout"),
    ("connection failed", "connection"),
    ("connection refused", "connection refused"),
    ("is not a completion", "not a completion"),
    ("answer is empty", "empty answer"),
    ("unreadable answer", "unreadable answer"),
    ("the grader refused", "grader refusal"),
    ("was cut off at", "cut off"),
)


def failure_class(error: str) -> str:
    """A short, stable name for the kind of failure an error message describes."""
    if error.startswith(UNGRADABLE):
        return "conversation refused"
    match = _HTTP.match(error)
    if match:
        return f"HTTP {match.group(1)}"
    for marker, name in _CLASSES:
        if marker in error:
            return name
    return "other"


def failures_note(run: Run, endpoint: str, errors: list[str]) -> None:
    """Log the classes among `errors` (from the `endpoint` role: grader or policy) that this
    run has not logged yet."""
    if not errors:
        return
    first: dict[str, str] = {}
    for error in errors:
        first.setdefault(failure_class(error), error)
    for name, example in first.items():
        try:
            new = cache.add(f"failure-logged:{run.code}:{endpoint}:{name.replace(' ', '-')}", 1, REMEMBER_SECONDS)
        except Exception:
            new = True  # without the cache, a repeated line beats a missing one
        if new:
            log.warning(
                "run %r: %s calls fail with %s, e.g. %s",
                run.name,
                endpoint,
                name,
                example[:300],
                extra={"run": run.name, "endpoint": endpoint, "failure": name},
            )
