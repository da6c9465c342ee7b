"""Model fields."""

import json

from django.db import models


class JSONTextField(models.TextField):
    """JSON kept as text: written and read back byte for byte, never parsed by the database.

    For large documents that are only stored and shown (conversation messages), this spares
    PostgreSQL converting tens of megabytes to jsonb on import, and keeps key order.
    """

    def from_db_value(self, value, expression, connection):
        if value is None:
            return None
        return json.loads(value)

    def to_python(self, value):
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                return value
        return value

    def get_prep_value(self, value):
        if value is None:
            return None
        return json.dumps(value)

    def value_to_string(self, obj):
        return json.dumps(self.value_from_object(obj))
