"""Read settings from the environment, failing loudly on values that make no sense.

A typo in a deployment's environment should stop the process at start-up with a message
naming the variable, not run with a silently different configuration.
"""

import os
import re

from django.conf import global_settings
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


# Every variable the settings read: none of them may ever be sent as an endpoint's API key.
NAMES_READ: set[str] = set()
# The variables of this project and its tools, also those read after the endpoint settings
# or outside settings.py (the list in the README's Configuration section, and more).
PROJECT_VARIABLES = {
    "SECRET_KEY",
    "DATABASE_URL",
    "DATABASE_NAME",
    "TEST_DATABASE_NAME",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "CELERY_BROKER_DIR",
    "CELERY_TASK_DEFAULT_QUEUE",
    "CELERY_TASK_ALWAYS_EAGER",
    "CELERY_TASK_TIME_LIMIT",
    "DEBUG",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "VAR_DIR",
    "STATIC_ROOT",
    "LOG_LEVEL",
    "PORT",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "DJANGO_SETTINGS_MODULE",
    "PGPASSWORD",
    "POSTGRES_PASSWORD",
    "ENDPOINT_KEY_VARIABLES",
    "ENDPOINT_ALLOWED_HOSTS",
    "ENDPOINT_ALLOW_PRIVATE_NETWORKS",
    "CACHE_URL",
    "CACHE_KEY_PREFIX",
    "LOG_FORMAT",
    "API_RUN_LAUNCH_RATE",
    "API_TOKEN_RATE",
    "API_NUM_PROXIES",
    "CELERY_QUEUE_PREFIX",
    "CELERY_LEGACY_QUEUE",
    "CELERY_VISIBILITY_TIMEOUT",
    "CELERY_WORKER_MAX_TASKS_PER_CHILD",
    "CELERY_WORKER_MAX_MEMORY_MB",
    "LOGIN_FAILURE_LIMIT",
    "LOGIN_LOCKOUT_MINUTES",
    "WEB_CONCURRENCY",
    "GUNICORN_TIMEOUT",
    "GUNICORN_CMD_ARGS",
}
VARIABLE_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def env_str(name: str, default: str) -> str:
    NAMES_READ.add(name)
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    NAMES_READ.add(name)
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
    NAMES_READ.add(name)
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


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    NAMES_READ.add(name)
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if value != value or (minimum is not None and value < minimum):  # NaN, or too small
        raise ImproperlyConfigured(f"{name}={raw!r} is below the minimum of {minimum} or not a number")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={raw!r} is above the maximum of {maximum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    NAMES_READ.add(name)
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    NAMES_READ.add(name)
    raw = os.environ.get(name)
    if raw is None:
        return default
    by_lower = {choice.lower(): choice for choice in choices}
    if raw.strip().lower() not in by_lower:
        raise ImproperlyConfigured(f"{name}={raw!r} is not one of: {', '.join(choices)}")
    return by_lower[raw.strip().lower()]


_PERIODS = {
    "s": "second",
    "sec": "second",
    "second": "second",
    "m": "minute",
    "min": "minute",
    "minute": "minute",
    "h": "hour",
    "hour": "hour",
    "d": "day",
    "day": "day",
}


def env_rate(name: str, default: str) -> str:
    """A request rate as DRF's throttles read it: '<count>/<second|minute|hour|day>'."""
    NAMES_READ.add(name)
    raw = os.environ.get(name)
    if raw is None:
        return default
    count, _, period = raw.strip().partition("/")
    if not count.isdigit() or int(count) < 1 or period.strip().lower() not in _PERIODS:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a rate: use e.g. 30/hour or 5/minute")
    return f"{int(count)}/{_PERIODS[period.strip().lower()]}"


def env_url(name: str, default: str, *, schemes: tuple[str, ...]) -> str:
    NAMES_READ.add(name)
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    if not value.startswith(tuple(f"{scheme}://" for scheme in schemes)):
        raise ImproperlyConfigured(f"{name}={raw!r} must start with one of: {', '.join(s + '://' for s in schemes)}")
    return value


def reserved_variables() -> set[str]:
    """Names that are never an endpoint's key: Django's settings, and what our settings read."""
    return {name for name in dir(global_settings) if name.isupper()} | PROJECT_VARIABLES | NAMES_READ


def endpoint_key_variables(names: list[str]) -> list[str]:
    """The operator's allowlist of API key variables, refused whole if any name is not a
    plain variable name or is one of the reserved ones (a worker would send its value out)."""
    reserved = reserved_variables()
    for name in names:
        if not VARIABLE_NAME.match(name):
            raise ImproperlyConfigured(
                f"ENDPOINT_KEY_VARIABLES: {name!r} is not an environment variable name (A-Z, 0-9, _)"
            )
        if name in reserved:
            raise ImproperlyConfigured(
                f"ENDPOINT_KEY_VARIABLES may not name {name}: it is one of Django's or this application's "
                "own settings, and its value would be sent to a model provider. Put the provider's key in a "
                "variable of its own (e.g. OPENAI_API_KEY) and list that."
            )
    return names
