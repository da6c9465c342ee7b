"""Guards for migrations that would lose data on the way back.

Some reverse migrations cannot keep what later code stored: narrowing a widened column cuts
longer values (PostgreSQL's cast to varchar(n) does it without a word), and putting back an
older constraint fails halfway on rows the newer schema allows (a run planned on the
physician-labelled items cannot satisfy the old `run_has_plan`). Such a migration ends with a
guard (:func:`refuse_to_cut`, :func:`refuse_while_rows`): forward it does nothing; backward it
runs first (operations are undone in reverse order) and refuses, listing the rows.

That alone would stop `migrate app 0007` in the middle: the migrations after the guarded one
are undone first, each in its own transaction. So the `migrate` command also asks every guard
on its plan before it changes anything (:func:`refuse_lossy_plan`, connected to
``pre_migrate``), and refuses the whole plan, listing every problem at once.
"""

from __future__ import annotations

from collections.abc import Callable

from django.apps.registry import Apps
from django.core.management.base import CommandError
from django.db import migrations
from django.db.migrations.exceptions import IrreversibleError
from django.db.models.functions import Length

SHOWN = 20
# (models as they are, database alias) -> what going back would lose, in a sentence, or None.
Losses = Callable[[Apps, str], str | None]


def refusal(problems: list[str]) -> str:
    listed = " ".join(problems)
    return f"Not migrating back: {listed} Nothing was changed; migrate back again once they are dealt with."


def refuse_reverse(losses: Losses) -> migrations.RunPython:
    """A RunPython that does nothing forward and refuses to go back while `losses` finds any."""

    def check(apps: Apps, schema_editor) -> None:
        found = losses(apps, schema_editor.connection.alias)
        if found:
            raise IrreversibleError(refusal([found]))

    check.losses = losses  # type: ignore[attr-defined]  # read by refuse_lossy_plan
    return migrations.RunPython(migrations.RunPython.noop, check)


def _listed(rows: list, more: int) -> str:
    return ", ".join(rows[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def refuse_to_cut(app_label: str, model_name: str, field: str, max_length: int, *, shown_by: str = "pk"):
    """A guard that refuses to reverse while any `field` value is longer than `max_length`
    (naming each row by `shown_by`)."""

    def losses(apps: Apps, using: str) -> str | None:
        model = apps.get_model(app_label, model_name)
        too_long = (
            model.objects.using(using)
            .annotate(length=Length(field))
            .filter(length__gt=max_length)
            .order_by("pk")
            .values_list(shown_by, "length")
        )
        found = list(too_long[: SHOWN + 1])
        if not found:
            return None
        listed = _listed([f"{name} ({length} characters)" for name, length in found], too_long.count() - SHOWN)
        return (
            f"{model_name}.{field} holds values longer than the {max_length} characters the earlier schema "
            f"allows, which would be cut: {model_name} {listed}. Shorten them (or export the data first)."
        )

    return refuse_reverse(losses)


def refuse_while_rows(app_label: str, model_name: str, *, where: dict, shown_by: str, why: str, fix: str):
    """A guard that refuses to reverse while rows match `where`, the rows the earlier schema
    cannot hold (`why`), naming each by `shown_by`; `fix` says what to do."""

    def losses(apps: Apps, using: str) -> str | None:
        rows = apps.get_model(app_label, model_name).objects.using(using).filter(**where).order_by("pk")
        found = [str(name) for name in rows.values_list(shown_by, flat=True)[: SHOWN + 1]]
        if not found:
            return None
        return f"{why}: {model_name} {_listed(found, rows.count() - SHOWN)}. {fix}"

    return refuse_reverse(losses)


def refuse_lossy_plan(sender, *, plan=None, apps: Apps | None = None, using: str = "default", **kwargs) -> None:
    """pre_migrate: refuse a `migrate` whose plan undoes a guarded migration while its guard
    finds rows it would lose, before the first migration is undone."""
    if not plan or apps is None:
        return
    problems = []
    for migration, backwards in plan:
        if not backwards:
            continue
        for operation in migration.operations:
            losses = getattr(getattr(operation, "reverse_code", None), "losses", None)
            if losses is None:
                continue
            try:
                found = losses(apps, using)
            except LookupError:  # the model is gone in a later migration: its own guard asks in place
                continue
            if found:
                problems.append(f"({migration.app_label} {migration.name}) {found}")
    if problems:
        raise CommandError(refusal(problems))
