"""`/api/docs/`: the API's operations as a page of the site, read from the OpenAPI schema.

Swagger UI fails the accessibility checks every other page passes (contrast, nested controls, no
page language), so the docs are a plain page instead: each operation with its parameters and
answers, and links to the full schema (`/api/schema/`) for tools that read OpenAPI.
"""

from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from drf_spectacular.generators import SchemaGenerator

METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    tag: str
    about: str
    parameters: tuple[str, ...]
    answers: tuple[str, ...]


@lru_cache(maxsize=1)
def operations() -> tuple[Operation, ...]:
    """Every operation of the schema, by tag then path (the schema does not change while a process runs)."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    for path, item in schema["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            about = (op.get("summary") or op.get("description") or "").strip()
            found.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    tag=(op.get("tags") or ["other"])[0],
                    about=about,
                    parameters=tuple(
                        f"{p['name']} ({p['in']}{', required' if p.get('required') else ''})"
                        for p in op.get("parameters", [])
                    ),
                    answers=tuple(sorted(op.get("responses", {}))),
                )
            )
    found.sort(key=lambda o: (o.tag, o.path, METHODS.index(o.method.lower())))
    return tuple(found)


@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    groups = [(tag, list(ops)) for tag, ops in groupby(operations(), key=lambda o: o.tag)]
    return render(request, "api_docs.html", {"groups": groups, "count": len(operations())})
