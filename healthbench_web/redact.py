"""Keep API keys out of text that is stored, shown or logged.

Some gateways repeat the key they were sent in their error text ("Incorrect API key
provided: Bearer sk-..."), and such text becomes a failed grade's reason, a run's error and a
log line. Every provider message goes through :func:`redact` before it is kept, and both log
formats (healthbench_web.log_format) pass each line through it with the keys of the
allowlisted variables (:func:`endpoint_keys`).

A key is removed whole, and so is any long run of its characters (a gateway that prints the
first 20 characters of a key gives away most of it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

REMOVED = "[key removed]"
# Shorter values are no secret worth the name (a test's "unused"), and replacing them would
# mangle ordinary words.
MIN_KEY_LENGTH = 8
# A fragment of a key this long or longer is removed too.
MIN_FRAGMENT = 12
_WORD = re.compile(rf"[A-Za-z0-9_\-]{{{MIN_FRAGMENT},}}")


def redact(text: str, keys: Iterable[str]) -> str:
    """`text` without any of `keys`, nor any run of MIN_FRAGMENT or more of a key's characters."""
    keys = [key for key in keys if len(key) >= MIN_KEY_LENGTH]
    if not keys or not text:
        return text
    for key in keys:
        if key in text:
            text = text.replace(key, REMOVED)
    return _WORD.sub(lambda m: _without_fragments(m.group(0), keys), text)


def _without_fragments(word: str, keys: list[str]) -> str:
    for key in keys:
        if word in key:
            return REMOVED
        # The word may hold a fragment with text around it ("key=sk-abc...").
        for start in range(len(word) - MIN_FRAGMENT + 1):
            if word[start : start + MIN_FRAGMENT] in key:
                return REMOVED
    return word


def endpoint_keys() -> list[str]:
    """The values of the key variables a worker may read (ENDPOINT_KEY_VARIABLES) that are set."""
    try:
        from django.conf import settings

        names = list(getattr(settings, "ENDPOINT_KEY_VARIABLES", []))
    except Exception:  # settings not configured (a tool run outside Django)
        return []
    return [value for value in (os.environ.get(name, "") for name in names) if len(value) >= MIN_KEY_LENGTH]
