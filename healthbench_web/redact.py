"""Keep API keys out of text that is stored, shown or logged.

Some gateways repeat the key they were sent in their error text ("Incorrect API key
provided: Bearer sk-..."), and such text becomes a failed grade's reason, a run's error and a
log line. Every provider message goes through :func:`redact` before it is kept, and both log
formats (healthbench_web.log_format) pass each line through it with the keys of the
allowlisted variables (:func:`endpoint_keys`).

A key is found by its value in every form a gateway might echo it in: as sent, base64 or
base64url (at any alignment, so also inside ``Basic`` credentials), hex, %-encoded (wholly or
in part), and with separators, escapes or zero-width characters between its characters. The
text is reduced to its skeleton, its ASCII letters and digits in lower case (a ``%XX`` or
``\\uXXXX`` that stands for a letter or digit counts as that character; every other character
is a separator), with a map back to where each came from; each form of the key, reduced the
same way, is looked for in that skeleton with ``str.find``, and a match removes the whole span
of the original text it came from. So the work is linear in the text.

A fragment of a key is removed too: any run of MIN_FRAGMENT or more of its characters, in the
text or in its skeleton against any form of the key (a gateway that prints the first 20
characters of a key gives away most of it, and a message cut to a few hundred characters may
end inside an encoded key).
"""

from __future__ import annotations

import base64
import functools
import os
import re
from collections.abc import Iterable

REMOVED = "[key removed]"
# Shorter values are no secret worth the name (a test's "unused"), and replacing them would
# mangle ordinary words. A form of a key whose skeleton is shorter is not looked for either.
MIN_KEY_LENGTH = 8
# A fragment of a key this long or longer is removed too.
MIN_FRAGMENT = 12
_WORD = re.compile(rf"[A-Za-z0-9_\-]{{{MIN_FRAGMENT},}}")
# What a skeleton is read from: runs of letters and digits, %XX, \uXXXX, and the backslash
# escapes that stand for a separator (JSON and the text log write a newline as "\n"). Any other
# character is a separator and is skipped.
_TOKEN = re.compile(r'[A-Za-z0-9]+|%[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\[nrtbf/\\"]')


def redact(text: str, keys: Iterable[str]) -> str:
    """`text` without any of `keys` in any encoding, nor any run of MIN_FRAGMENT or more of a key's characters."""
    keys = [key for key in keys if len(key) >= MIN_KEY_LENGTH]
    if not keys or not text:
        return text
    forms = _forms(tuple(keys))
    text = _without_forms(text, forms, _grams(forms))
    return _WORD.sub(lambda m: _without_fragments(m.group(0), keys), text)


@functools.lru_cache(maxsize=64)
def _forms(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The skeletons of every form of each key that is looked for."""
    forms: set[str] = set()
    for key in keys:
        raw = key.encode("utf-8", "surrogatepass")
        candidates = [key, raw.hex(), *_base64_cores(raw)]
        forms.update(skeleton for skeleton in map(_skeleton_of, candidates) if len(skeleton) >= MIN_KEY_LENGTH)
    return tuple(sorted(forms, key=len, reverse=True))


@functools.lru_cache(maxsize=64)
def _grams(forms: tuple[str, ...]) -> frozenset[str]:
    """Every run of MIN_FRAGMENT characters of every form: a fragment of a form is removed too."""
    return frozenset(form[i : i + MIN_FRAGMENT] for form in forms for i in range(len(form) - MIN_FRAGMENT + 1))


def _base64_cores(raw: bytes) -> list[str]:
    """The base64 characters that depend on `raw` alone, wherever it starts in the encoded bytes.

    Bytes are encoded three at a time, so a key that starts one or two bytes into a group (after
    "user:" in Basic credentials, say) gives other characters; each of the three alignments gives
    the groups that hold nothing but key bytes. base64url differs only in "+/" and "-_", which
    are separators in a skeleton.
    """
    cores = [base64.b64encode(raw).decode().rstrip("=")]  # the key alone, its last group padded
    for offset in (0, 1, 2):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        first, last = (1 if offset else 0), (offset + len(raw)) // 3  # the groups of key bytes only
        cores.append(encoded[4 * first : 4 * last])
    return cores


def _skeleton_of(text: str) -> str:
    return "".join(char.lower() for char in text if char.isascii() and char.isalnum())


def _skeleton(text: str) -> tuple[str, list[int], list[int]]:
    """The text's lower-case ASCII letters and digits, with where each starts and ends in `text`."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for match in _TOKEN.finditer(text):
        token, at, end = match.group(0), match.start(), match.end()
        if token[0] not in "%\\":  # a run of letters and digits
            chars.append(token.lower())
            starts.extend(range(at, end))
            ends.extend(range(at + 1, end + 1))
            continue
        char = chr(int(token[1:] if token[0] == "%" else token[2:], 16)) if len(token) > 2 else " "
        if char.isascii() and char.isalnum():
            chars.append(char.lower())
            starts.append(at)
            ends.append(end)
    return "".join(chars), starts, ends


def _without_forms(text: str, forms: tuple[str, ...], grams: frozenset[str]) -> str:
    if not forms:
        return text
    skeleton, starts, ends = _skeleton(text)
    spans: list[tuple[int, int]] = []
    for form in forms:
        at = skeleton.find(form)
        while at != -1:
            spans.append((starts[at], ends[at + len(form) - 1]))
            at = skeleton.find(form, at + len(form))
    # Fragments: a text cut short (a provider message is kept to a few hundred characters) or a
    # gateway that repeats part of the key. Consecutive matching windows make one span.
    at, last = 0, len(skeleton) - MIN_FRAGMENT
    while at <= last:
        if skeleton[at : at + MIN_FRAGMENT] not in grams:
            at += 1
            continue
        end = at + 1
        while end <= last and skeleton[end : end + MIN_FRAGMENT] in grams:
            end += 1
        spans.append((starts[at], ends[end + MIN_FRAGMENT - 2]))
        at = end + MIN_FRAGMENT - 1
    if not spans:
        return text
    spans.sort()
    pieces: list[str] = []
    kept_from = 0
    for start, end in spans:
        if end <= kept_from:
            continue
        if start >= kept_from:  # else it overlaps the span removed just before, which grows
            pieces += [text[kept_from:start], REMOVED]
        kept_from = end
    pieces.append(text[kept_from:])
    return "".join(pieces)


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
