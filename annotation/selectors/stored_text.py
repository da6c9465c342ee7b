"""Finding stored text that the importers would refuse today.

Rows written before the file checks existed (or behind the application's back) can hold a
lone surrogate or NUL inside JSON, NUL or bytes that are not UTF-8 in a SQLite text column,
or a value longer than its column (SQLite does not enforce lengths). Pages repair such text
as they read it; this reads the raw column values, so that the rows can be reported and
rewritten (services.stored_text).
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db import connection, models

from annotation.fields import JSONTextField
from annotation.formats.validation import BAD_CHARACTER, describe_character, find_bad_text, replace_bad_text

APPS = ("annotation", "grading")
FETCH = 2000


@dataclass(frozen=True)
class StoredTextProblem:
    model: type[models.Model]
    pk: Any
    field: str
    where: str  # inside a JSON value, its path, e.g. [0].content
    message: str
    # The value to store instead, or None when it cannot be decided here (a unique value too long).
    repaired: Any

    def __str__(self) -> str:
        label = self.model._meta.label
        return f"{label} id {self.pk}, field {self.field}{self.where}: {self.message}"


def _text_fields(model: type[models.Model]) -> Iterator[models.Field]:
    for field in model._meta.concrete_fields:
        if isinstance(field, models.CharField | models.TextField | models.JSONField):
            yield field


@contextmanager
def _raw_text() -> Iterator[None]:
    """On SQLite, read text as bytes for the duration (db_text would repair it on the way)."""
    connection.ensure_connection()
    if connection.vendor != "sqlite":
        yield
        return
    sqlite = connection.connection
    previous = sqlite.text_factory
    sqlite.text_factory = bytes
    try:
        yield
    finally:
        sqlite.text_factory = previous


def _is_json(field: models.Field) -> bool:
    return isinstance(field, JSONTextField | models.JSONField)


def _check(model: type[models.Model], field: models.Field, pk: Any, raw: Any) -> StoredTextProblem | None:
    if isinstance(raw, bytes):
        try:
            text = raw.decode()
        except UnicodeDecodeError as exc:
            fixed = raw.decode(errors="replace")
            message = f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1})"
            return StoredTextProblem(model, pk, field.name, "", message, _repair(field, fixed))
    else:
        text = raw
    if found := BAD_CHARACTER.search(text):
        return StoredTextProblem(
            model, pk, field.name, "", describe_character(text, found.start()), _repair(field, text)
        )
    if _is_json(field):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None  # not ours to judge: Django reads such a value back as the string
        bad = find_bad_text(value)
        if bad:
            where = bad[0] if bad[0].startswith("[") else f".{bad[0]}" if bad[0] else ""
            return StoredTextProblem(model, pk, field.name, where, bad[1], replace_bad_text(value))
        return None
    limit = getattr(field, "max_length", None)
    if limit and len(text) > limit:
        unique = field.unique or any(
            isinstance(c, models.UniqueConstraint) and field.name in c.fields for c in model._meta.constraints
        )
        message = f"is {len(text):,} characters long; the column holds {limit}"
        if unique:
            return StoredTextProblem(model, pk, field.name, "", message + " (unique: rename it by hand)", None)
        return StoredTextProblem(model, pk, field.name, "", message + " (cut to fit)", text[:limit])
    return None


def _repair(field: models.Field, text: str) -> Any:
    fixed = BAD_CHARACTER.sub("\ufffd", text)
    if _is_json(field):
        try:
            return replace_bad_text(json.loads(fixed))
        except json.JSONDecodeError:
            return None
    limit = getattr(field, "max_length", None)
    return fixed[:limit] if limit else fixed


def _scanned_fields(model: type[models.Model]) -> list[models.Field]:
    fields = list(_text_fields(model))
    if connection.vendor == "postgresql":
        # PostgreSQL refuses NUL and bad UTF-8 in text and enforces varchar lengths: only
        # JSON kept as text can still hold a bad escape.
        fields = [f for f in fields if _is_json(f)]
    return fields


def _where(fields: list[models.Field]) -> str:
    """On PostgreSQL, only rows whose JSON holds a \\u escape at all (the others are fine)."""
    if connection.vendor != "postgresql":
        return ""
    quote = connection.ops.quote_name
    tests = [f"strpos(CAST({quote(str(f.column))} AS TEXT), '\\u') > 0" for f in fields]
    return " WHERE " + " OR ".join(tests)


def stored_text_problems() -> list[StoredTextProblem]:
    """Every stored text value, in the tables of APPS, that breaks a rule the importers enforce."""
    problems: list[StoredTextProblem] = []
    quote = connection.ops.quote_name
    for app in APPS:
        for model in apps.get_app_config(app).get_models():
            fields = _scanned_fields(model)
            if not fields:
                continue
            table, pk = quote(model._meta.db_table), quote(str(model._meta.pk.column))
            columns = ", ".join(f"CAST({quote(str(f.column))} AS TEXT)" for f in fields)
            with _raw_text(), connection.cursor() as cursor:
                # Names from the model, quoted; _where adds only conditions on those columns.
                cursor.execute(f"SELECT {pk}, {columns} FROM {table}{_where(fields)} ORDER BY {pk}")  # noqa: S608
                while batch := cursor.fetchmany(FETCH):
                    for pk_value, *values in batch:
                        for field, raw in zip(fields, values, strict=True):
                            if raw is None:
                                continue
                            problem = _check(model, field, pk_value, raw)
                            if problem:
                                problems.append(problem)
    return problems
