"""A queryset built and compiled to SQL once per process, then run with new parameters.

Building a queryset (filters, joins) and compiling it to SQL costs Django 0.3-0.6 ms of CPU per
query, five to ten times what PostgreSQL's driver spends sending it and reading the rows; the
physician pages run the same dozen queries on every request with only their parameters changed.
`CompiledQuery(build, *sentinels)` calls `build(*sentinels)` once per database, keeps the
compiler and its SQL, and remembers where each sentinel sits among the SQL's parameters; each
call then puts the real values in those places and reads the rows back through the compiler's
own converters and, for model querysets, Django's own way of building instances (select_related
included). What comes back is what the queryset would return, rows or instances alike
(`tests/test_compiled_query.py` holds each query of the pages to its queryset).

Sentinels are values no real parameter takes (`SENTINEL_INT`, `SENTINEL_UUID`, ...): a build
must pass each one where a filter takes its value, unchanged by the field (an integer id, a
UUID, a string), never inside a function of it.
"""

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections, router
from django.db.models import Field, Model, QuerySet
from django.db.models.query import ModelIterable, ValuesListIterable, get_related_populators

# Within a 32-bit integer column's range: Django finds nothing, without SQL, for a value out of it.
SENTINEL_INT = -1_934_003_301
SENTINEL_UUID = uuid.UUID("0f0e0d0c-0b0a-4908-8706-050403020100")
SENTINEL_TEXT = "\u2063sentinel\u2063"


def sentinels(count: int, kind: type = int, *, start: int = 0) -> list[Any]:
    """`count` distinct sentinels of one kind (from the `start`th: a query's later ones of the kind)."""
    numbers = range(start, start + count)
    if kind is int:
        return [SENTINEL_INT - n for n in numbers]
    if kind is uuid.UUID:
        return [uuid.UUID(int=SENTINEL_UUID.int + n) for n in numbers]
    return [f"{SENTINEL_TEXT}{n}" for n in numbers]


def column(model: type[Model], name: str) -> str:
    """The database column of a model's field (for the few reads written as plain SQL)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.column:
        raise TypeError(f"{model.__name__}.{name} has no column")
    return field.column


class _Compiled:
    def __init__(self, queryset: QuerySet, marks: Sequence[Any], alias: str):
        self.model = queryset.model
        self.iterable = queryset._iterable_class
        if self.iterable not in (ModelIterable, ValuesListIterable):
            raise TypeError(f"CompiledQuery takes model or values_list querysets, not {self.iterable.__name__}")
        if queryset._known_related_objects or queryset._prefetch_related_lookups:  # type: ignore[attr-defined]
            raise TypeError("CompiledQuery takes no prefetch_related and no related managers' querysets")
        self.compiler = queryset.query.get_compiler(using=alias)
        self.sql, params = self.compiler.as_sql()
        self.params = list(params)
        # (place among the parameters, which sentinel, whether the database took a UUID as hex)
        self.slots: list[tuple[int, int, bool]] = []
        for place, param in enumerate(self.params):
            for which, mark in enumerate(marks):
                if param == mark or (isinstance(mark, uuid.UUID) and param == mark.hex):
                    self.slots.append((place, which, param != mark))
        missing = set(range(len(marks))) - {which for _, which, _ in self.slots}
        if missing:
            raise ValueError(f"sentinels {sorted(missing)} are not among the SQL's parameters: {self.sql}")
        fields = [s[0] for s in self.compiler.select[0 : self.compiler.col_count]]
        self.converters = self.compiler.get_converters(fields)
        if self.iterable is ModelIterable:
            select, klass_info = self.compiler.select, self.compiler.klass_info
            if klass_info is None:
                raise TypeError("a model queryset without its model's columns")
            fields_of = klass_info["select_fields"]
            self.span = (fields_of[0], fields_of[-1] + 1)
            self.init_list = [f[0].target.attname for f in select[self.span[0] : self.span[1]]]
            self.populators = get_related_populators(klass_info, select, alias)  # type: ignore[call-arg]
            self.annotations = self.compiler.annotation_col_map

    def rows(self, values: Sequence[Any], alias: str) -> list[tuple]:
        params = list(self.params)
        for place, which, as_hex in self.slots:
            value = values[which]
            params[place] = value.hex if as_hex and isinstance(value, uuid.UUID) else value
        with connections[alias].cursor() as cursor:
            cursor.execute(self.sql, params)
            found = cursor.fetchall()
        count = self.compiler.col_count
        if self.compiler.has_extra_select:
            found = [row[:count] for row in found]
        if self.converters:
            return [tuple(row) for row in self.compiler.apply_converters(found, self.converters)]
        return [tuple(row) for row in found]

    def instances(self, rows: list[tuple], alias: str) -> list[Model]:
        start, end = self.span
        found = []
        for row in rows:
            obj = self.model.from_db(alias, self.init_list, row[start:end])
            for populator in self.populators:
                populator.populate(row, obj)
            for name, place in (self.annotations or {}).items():
                setattr(obj, name, row[place])
            found.append(obj)
        return found


class CompiledQuery:
    """`build(*marks)` compiled once per database; `.all(*values)` runs it with `values` in their places."""

    def __init__(self, build: Callable[..., QuerySet], *marks: Any):
        self.build = build
        self.marks = marks
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def _for(self, alias: str) -> _Compiled:
        compiled = self._compiled.get(alias)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(alias) or _Compiled(self.build(*self.marks), self.marks, alias)
                self._compiled[alias] = compiled
        return compiled

    def all(self, *values: Any) -> list:
        """What the queryset built from `values` would return, as a list."""
        if len(values) != len(self.marks):
            raise TypeError(f"{len(self.marks)} values expected, {len(values)} given")
        alias = router.db_for_read(self._model())
        compiled = self._for(alias)
        rows = compiled.rows(values, alias)
        return compiled.instances(rows, alias) if compiled.iterable is ModelIterable else rows

    def get(self, *values: Any) -> Any:
        """As the queryset's `.get()`: the one row or instance, else DoesNotExist or MultipleObjectsReturned."""
        found = self.all(*values)
        if len(found) == 1:
            return found[0]
        model = self._model()
        if not found:
            raise model.DoesNotExist(f"{model.__name__} matching query does not exist.")  # type: ignore[attr-defined]
        raise model.MultipleObjectsReturned(f"get() returned more than one {model.__name__}")  # type: ignore[attr-defined]

    def first(self, *values: Any) -> Any:
        found = self.all(*values)
        return found[0] if found else None

    def _model(self) -> type[Model]:
        compiled = next(iter(self._compiled.values()), None)
        return compiled.model if compiled is not None else self.build(*self.marks).model
