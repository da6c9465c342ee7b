"""Writes of endpoints. Runs keep their own snapshot of an endpoint (GraderConfig), so an
edit changes future runs only."""

from __future__ import annotations

from django.db import transaction

from grading.endpoints.forms import EndpointForm
from grading.models import Endpoint


def endpoint_save(*, form: EndpointForm) -> Endpoint:
    """Save a valid form (a new endpoint or an edit)."""
    with transaction.atomic():
        return form.save()
