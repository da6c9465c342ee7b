"""Writes of endpoints. Runs keep their own snapshot of an endpoint (GraderConfig), so an
edit changes future runs only."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from grading.endpoint_rules import endpoint_problems
from grading.models import Endpoint


def endpoint_save(*, endpoint: Endpoint) -> Endpoint:
    """Store a new or edited endpoint (the page's form has set and validated its fields).

    The key-variable and base-URL rules are checked here again, without resolving the host
    (the form did, and the worker does before every batch), so that no caller can store an
    endpoint that breaks them."""
    problems = endpoint_problems(base_url=endpoint.base_url, key_variable=endpoint.key_variable, resolve=False)
    if problems:
        raise ValidationError(problems)
    with transaction.atomic():
        endpoint.save()
    return endpoint
