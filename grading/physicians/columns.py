"""Numeric query results as numpy columns, read in bulk rather than row by row.

The quality programme reads 180,000 rows of plain numbers (ids, booleans, seconds). As Python
tuples each row costs the driver a tuple and numpy a conversion back (a binary COPY is no
better: the driver hands over one message per row). On PostgreSQL the database packs each
column into one bytea of fixed-width binary values, one row in all, which numpy reads as an
array. Any other backend, or a NULL in a column, takes the row-by-row path, which gives the
same numbers.
"""

from __future__ import annotations

import numpy as np
from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import QuerySet

# Per PostgreSQL type: the function giving its binary form, and numpy's reading of that form.
TYPES = {"bigint": ("int8send", ">i8"), "double precision": ("float8send", ">f8"), "boolean": ("boolsend", "?")}


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
        columns = _packed(queryset, types)
        if columns is not None:
            return columns
    rows = raw_rows(queryset)
    dtypes = [np.dtype(TYPES[t][1]).newbyteorder("=") for t in types]
    if not rows:
        return [np.zeros(0, dtype=d) for d in dtypes]
    return [np.array(column, dtype=d) for column, d in zip(zip(*rows, strict=True), dtypes, strict=True)]


def _packed(queryset: QuerySet, types: tuple[str, ...]) -> list[np.ndarray] | None:
    try:
        sql, params = queryset.query.sql_with_params()
    except EmptyResultSet:
        return None  # raw_rows answers it
    names = [f"c{i}" for i in range(len(types))]
    # Each column packed by the database into one bytea of its binary (network order) values:
    # the aggregates of one query read the rows in one order, so the columns stay aligned.
    # Django's compiled query, our own names and functions from TYPES; values travel apart (S608).
    packed = ", ".join(
        f"string_agg({TYPES[t][0]}(q.{name}::{t}), ''::bytea)" for name, t in zip(names, types, strict=True)
    )
    statement = f"SELECT count(*), {packed} FROM ({sql}) AS q({', '.join(names)})"  # noqa: S608
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(statement, params)
        count, *blobs = cursor.fetchone()
    columns = []
    for blob, t in zip(blobs, types, strict=True):
        dtype = np.dtype(TYPES[t][1])
        data = bytes(blob or b"")
        if len(data) != count * dtype.itemsize:
            return None  # a NULL somewhere: string_agg skips it, so this column is short
        columns.append(np.frombuffer(data, dtype=dtype).astype(dtype.newbyteorder("=")))
    return columns
