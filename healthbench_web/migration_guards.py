"""Guards for migrations that would lose data on the way back.

Reversing a migration that widened a column narrows it again, and PostgreSQL's cast to
varchar(n) cuts longer values without a word. `refuse_to_cut` goes at the end of such a
migration: forward it does nothing; backward it runs first (operations are undone in reverse
order) and stops the migration, listing the values that would be cut, so nothing is lost.
"""

from django.db import migrations
from django.db.migrations.exceptions import IrreversibleError
from django.db.models.functions import Length

SHOWN = 20


def refuse_to_cut(app_label: str, model_name: str, field: str, max_length: int, *, shown_by: str = "pk"):
    """A RunPython that refuses to reverse while any `field` value is longer than `max_length`
    (naming each row by `shown_by`)."""

    def check(apps, schema_editor) -> None:
        model = apps.get_model(app_label, model_name)
        too_long = (
            model.objects.annotate(length=Length(field))
            .filter(length__gt=max_length)
            .order_by("pk")
            .values_list(shown_by, "length")
        )
        found = list(too_long[: SHOWN + 1])
        if not found:
            return
        listed = ", ".join(f"{name} ({length} characters)" for name, length in found[:SHOWN])
        more = f" and {too_long.count() - SHOWN} more" if len(found) > SHOWN else ""
        raise IrreversibleError(
            f"Not migrating back: {model_name}.{field} holds values longer than the {max_length} characters the "
            f"earlier schema allows, which would be cut: {model_name} {listed}{more}. Nothing was changed. Shorten "
            "them (or export the data first), then migrate back again."
        )

    return migrations.RunPython(migrations.RunPython.noop, check)
