"""Numeric query results as numpy columns, read in bulk rather than row by row.

The quality programme reads 180,000 rows of plain numbers (ids, booleans, seconds). As Python
tuples each row costs the driver a tuple and numpy a conversion back; on PostgreSQL a binary
COPY of columns that are never NULL has a fixed width per row, so numpy reads the whole reply
as one array of records. Any other backend, or a NULL in the reply, takes the row-by-row path,
which gives the same numbers.
"""

from __future__ import annotations

import numpy as np
from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import QuerySet

# Per PostgreSQL type the cast applied and numpy's big-endian reading of its binary form.
TYPES = {"bigint": ">i8", "double precision": ">f8", "boolean": "?"}
# PGCOPY signature, flags and header extension length; a tuple count of -1 ends the data.
HEADER = 11 + 4 + 4
TRAILER = 2


def raw_rows(queryset: QuerySet) -> list[tuple]:
    """The rows of a `values_list` queryset as the driver gives them, without Django's
    converters (a Python call per value). Only for columns the driver already returns as
    wanted (ints, floats, text, booleans)."""
    try:
        sql, params = queryset.query.sql_with_params()
    except EmptyResultSet:  # e.g. a filter on an empty list: no query to run
        return []
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def numeric_columns(queryset: QuerySet, types: tuple[str, ...]) -> list[np.ndarray]:
    """One array per column of a `values_list` queryset, each column read as the PostgreSQL
    type named in `types` ("bigint" as int64, "double precision" as float64, "boolean" as
    bool)."""
    unknown = set(types) - set(TYPES)
    if unknown:
        raise ValueError(f"no numeric column type {sorted(unknown)}; known: {sorted(TYPES)}")
    connection = connections[queryset.db]
    if connection.vendor == "postgresql":
        columns = _copied(queryset, types)
        if columns is not None:
            return columns
    rows = raw_rows(queryset)
    dtypes = [np.dtype(TYPES[t]).newbyteorder("=") for t in types]
    if not rows:
        return [np.zeros(0, dtype=d) for d in dtypes]
    return [np.array(column, dtype=d) for column, d in zip(zip(*rows, strict=True), dtypes, strict=True)]


def _copied(queryset: QuerySet, types: tuple[str, ...]) -> list[np.ndarray] | None:
    try:
        sql, params = queryset.query.sql_with_params()
    except EmptyResultSet:
        return None  # raw_rows answers it
    names = [f"c{i}" for i in range(len(types))]
    # Django's compiled query, our own names and casts from TYPES; the values travel apart (S608).
    casts = ", ".join(f"{name}::{t}" for name, t in zip(names, types, strict=True))
    statement = f"COPY (SELECT {casts} FROM ({sql}) AS q({', '.join(names)})) TO STDOUT (FORMAT BINARY)"  # noqa: S608
    with connections[queryset.db].cursor() as cursor, cursor.cursor.copy(statement, params) as copy:
        data = b"".join(bytes(block) for block in copy)
    fields: list[tuple[str, str]] = [("count", ">i2")]
    for name, t in zip(names, types, strict=True):
        fields += [(f"{name}_size", ">i4"), (name, TYPES[t])]
    record = np.dtype(fields)
    body = len(data) - HEADER - TRAILER
    if body < 0 or body % record.itemsize:
        return None  # a NULL somewhere: its field has no bytes, so rows differ in width
    rows = np.frombuffer(data, dtype=record, offset=HEADER, count=body // record.itemsize)
    if rows.size and (rows["count"] != len(names)).any():
        return None
    for name in names:
        if rows.size and (rows[f"{name}_size"] != record[name].itemsize).any():
            return None
    return [rows[name].astype(record[name].newbyteorder("=")) for name in names]
