"""Fast bulk inserts of plain rows: PostgreSQL's COPY, or executemany on SQLite.

A HealthBench import writes ~60,000 criteria and a paper-size run ~900,000 grades. Building a
Django model instance per row and letting bulk_create quote every parameter costs more than
the database's own work, so hot paths hand over rows of database-ready values instead.
"""

import json
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
from django.db import connection
from django.db.models import Model
from django.utils import timezone

T = TypeVar("T")
# SQLite allows 999 variables per query in old builds: a lookup `filter(x__in=...)` of many values
# goes in chunks below that, on every database alike.
IN_CHUNK = 900


def chunks(values: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    """`values` in consecutive slices of at most `size`, for `__in` lookups."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def new_codes(n: int) -> list[str]:
    """n random version-4 UUIDs as 32-digit hex, the form both backends accept."""
    raw = np.frombuffer(np.random.default_rng().bytes(16 * n), dtype=np.uint8).reshape(n, 16).copy()
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    return [row.tobytes().hex() for row in raw]


def db_now() -> Any:
    """The current time as a value of insert_rows' rows, for their timestamp columns.

    On PostgreSQL it is ISO-8601 text with its offset, which COPY hands to the column as it
    is: given a datetime, psycopg formats it again for every row, a quarter of the client's
    work per criterion of an import (README, Benchmarks, issue 32).
    """
    if connection.vendor == "postgresql":
        return timezone.now().isoformat()
    return connection.ops.adapt_datetimefield_value(timezone.now())


def db_json(value: Any) -> str:
    return json.dumps(value)


def _check_columns(model: type[Model], columns: Sequence[str]) -> None:
    # A column with a database default (db_default) may be left out: the database fills it, as
    # it computes a generated one, which may not be given at all.
    fields = {f.column: f for f in model._meta.concrete_fields if f.column and not f.primary_key}
    generated = {column for column, f in fields.items() if f.generated}
    required = {column for column, f in fields.items() if not f.null and not f.has_db_default() and not f.generated}
    missing = required - set(columns)
    if missing:
        raise ValueError(f"insert into {model._meta.db_table} lacks required columns {sorted(missing)}")
    if given := generated & set(columns):
        raise ValueError(f"insert into {model._meta.db_table} gives generated columns {sorted(given)}")


def insert_rows(
    model: type[Model], columns: Sequence[str], rows: Sequence[Sequence[Any]], *, ids: bool = True
) -> list[int]:
    """Insert `rows` (values for `columns`, in that order) and return their new ids in order.

    Ids increase with row order; exports rely on that for file order. Call inside a
    transaction: on SQLite the ids are taken after the current maximum, which is only safe
    while this transaction holds the write lock. With `ids=False` nothing is returned and
    PostgreSQL numbers the rows itself as COPY reads them (still in row order): taking 60,000
    ids with nextval() first cost its backend more than writing the rows' index entries.
    """
    _check_columns(model, columns)
    if not rows:
        return []
    meta = model._meta
    pk = meta.pk.column if meta.pk is not None else None
    if pk is None:
        raise ValueError(f"{meta.db_table} has no primary key column")
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    all_columns = ", ".join(quote(c) for c in [pk, *columns])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and not ids:
            given = ", ".join(quote(c) for c in columns)
            with cursor.cursor.copy(f"COPY {table} ({given}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return []
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [meta.db_table, pk, len(rows)],
            )
            new_ids = sorted(r[0] for r in cursor.fetchall())
            with cursor.cursor.copy(f"COPY {table} ({all_columns}) FROM STDIN") as copy:
                for pk, row in zip(new_ids, rows, strict=True):
                    copy.write_row((pk, *row))
        else:
            # BEGIN IMMEDIATE (settings) holds SQLite's write lock for the whole transaction.
            # Table and column names come from the model, quoted; the values travel apart (S608).
            cursor.execute(f"SELECT COALESCE(MAX({quote(pk)}), 0) FROM {table}")  # noqa: S608
            first = cursor.fetchone()[0] + 1
            new_ids = list(range(first, first + len(rows)))
            marks = ", ".join(["%s"] * (len(columns) + 1))
            cursor.executemany(
                f"INSERT INTO {table} ({all_columns}) VALUES ({marks})",  # noqa: S608
                [(pk, *row) for pk, row in zip(new_ids, rows, strict=True)],
            )
    return new_ids if ids else []
