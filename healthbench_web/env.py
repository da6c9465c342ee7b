"""Read settings from the environment, failing loudly on values that make no sense.

A typo in a deployment's environment should stop the process at start-up with a message
naming the variable, not run with a silently different configuration.
"""

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum of {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum of {maximum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None:
        return default
    by_lower = {choice.lower(): choice for choice in choices}
    if raw.strip().lower() not in by_lower:
        raise ImproperlyConfigured(f"{name}={raw!r} is not one of: {', '.join(choices)}")
    return by_lower[raw.strip().lower()]


_PERIODS = {"s": "second", "sec": "second", "second": "second", "m": "minute", "min": "minute", "minute": "minute",
            "h": "hour", "hour": "hour", "d": "day", "day": "day"}  # fmt: skip


def env_rate(name: str, default: str) -> str:
    """A request rate as DRF's throttles read it: '<count>/<second|minute|hour|day>'."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    count, _, period = raw.strip().partition("/")
    if not count.isdigit() or int(count) < 1 or period.strip().lower() not in _PERIODS:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a rate: use e.g. 30/hour or 5/minute")
    return f"{int(count)}/{_PERIODS[period.strip().lower()]}"


def env_url(name: str, default: str, *, schemes: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    if not value.startswith(tuple(f"{scheme}://" for scheme in schemes)):
        raise ImproperlyConfigured(f"{name}={raw!r} must start with one of: {', '.join(s + '://' for s in schemes)}")
    return value
