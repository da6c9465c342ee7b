"""The Endpoints page: curators add and edit endpoints (from a preset in one click);
researchers read the list, so they know what each name means and what it costs."""

from __future__ import annotations

from typing import NamedTuple

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods

from annotation.access import require_curator, require_role
from grading.access import READERS, get_endpoint_for_curator_rw
from grading.endpoints.forms import EndpointForm
from grading.endpoints.presets import PRESETS
from grading.endpoints.selectors import endpoints_listed, endpoints_with_key_problems
from grading.endpoints.services import endpoint_save
from grading.models import Endpoint
from grading.reference_grader import GraderVerdict
from grading.reports.grader_marks import endpoint_verdict


class EndpointRow(NamedTuple):
    """An endpoint on the list, and how its request compares with the reference grader's."""

    endpoint: Endpoint
    verdict: GraderVerdict


@require_GET
@login_required
def endpoint_list(request: HttpRequest) -> HttpResponse:
    role = require_role(request, *READERS)
    context = {
        "endpoints": [EndpointRow(endpoint, endpoint_verdict(endpoint)) for endpoint in endpoints_listed()],
        "can_edit": role == "curator",
        "presets": PRESETS.values(),
        "key_problems": endpoints_with_key_problems() if role == "curator" else [],
    }
    return render(request, "endpoints/endpoint_list.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def endpoint_new(request: HttpRequest) -> HttpResponse:
    require_curator(request)
    preset = PRESETS.get(request.GET.get("preset", ""))
    if request.GET.get("preset") and preset is None:
        no_preset = gettext("There is no preset %(preset)s; start from an empty form.")
        messages.error(request, no_preset % {"preset": repr(request.GET["preset"])})
    form = EndpointForm(request.POST or None, initial=preset.initial if preset else None)
    if request.method == "POST" and form.is_valid():
        endpoint = endpoint_save(endpoint=form.instance)
        saved = gettext("Saved endpoint %(name)s. Researchers can now choose it for runs.")
        messages.success(request, saved % {"name": endpoint.name})
        for warning in form.warnings:
            messages.warning(request, warning)
        return redirect("endpoint_list")
    status = 400 if request.method == "POST" else 200
    return render(request, "endpoints/endpoint_form.html", {"form": form, "preset": preset}, status=status)


@require_http_methods(["GET", "POST"])
@login_required
def endpoint_edit(request: HttpRequest, code) -> HttpResponse:
    endpoint = get_endpoint_for_curator_rw(request, code)
    form = EndpointForm(request.POST or None, instance=endpoint)
    if request.method == "POST" and form.is_valid():
        endpoint_save(endpoint=form.instance)
        saved = gettext("Saved %(name)s. Runs already made keep the settings they ran with.")
        messages.success(request, saved % {"name": endpoint.name})
        for warning in form.warnings:
            messages.warning(request, warning)
        return redirect("endpoint_list")
    status = 400 if request.method == "POST" else 200
    return render(request, "endpoints/endpoint_form.html", {"form": form, "endpoint": endpoint}, status=status)
