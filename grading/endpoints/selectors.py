"""Reads of endpoints for the pages and the admin."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from grading.endpoint_rules import key_variable_problem
from grading.models import Endpoint


def endpoints_listed() -> QuerySet[Endpoint]:
    # The runs column: one grouped query, not one per endpoint.
    return Endpoint.objects.annotate(runs=Count("snapshots__runs", distinct=True)).order_by("name")


def endpoints_with_key_problems() -> list[tuple[Endpoint, str]]:
    """Endpoints whose key variable the workers would refuse (made before the allowlist)."""
    found = []
    for endpoint in Endpoint.objects.order_by("name"):
        problem = key_variable_problem(endpoint.key_variable)
        if problem:
            found.append((endpoint, problem))
    return found
