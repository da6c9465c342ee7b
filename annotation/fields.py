"""Model fields.

The JSON fields here repair, on the way out of the database, text that rows stored before
the importers checked it may hold: a lone surrogate cannot be encoded as UTF-8 (any page or
API response showing it would fail) and NUL is refused by PostgreSQL. Both can only sit in
JSON as a `\\u` escape, so a value without one is returned untouched at the cost of one
regex search; one with a bad character gets U+FFFD in its place. `manage.py
check_stored_text --repair` rewrites such rows for good.
"""

import json
from typing import Any

from django.db import models

from annotation.formats.validation import may_hold_bad_text, replace_bad_text


def _cleaned(raw: Any, value: Any) -> Any:
    if isinstance(raw, str) and may_hold_bad_text(raw):
        return replace_bad_text(value)
    return value


class JSONTextField(models.TextField):
    """JSON kept as text: written and read back byte for byte, never parsed by the database.

    For large documents that are only stored and shown (conversation messages), this spares
    PostgreSQL converting tens of megabytes to jsonb on import, and keeps key order.
    """

    # For django-stubs: the value is the decoded JSON, not the text column's str.
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        return _cleaned(value, json.loads(value))

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                return value
        return value

    def get_prep_value(self, value: Any) -> Any:
        if value is None:
            return None
        return json.dumps(value)

    def value_to_string(self, obj: Any) -> str:
        return json.dumps(self.value_from_object(obj))


class CleanJSONField(models.JSONField):
    """Django's JSONField whose values never carry NUL or a lone surrogate out of the database."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return _cleaned(value, super().from_db_value(value, expression, connection))
