"""Curator pages: assigning work, watching progress and consensus, vetting physicians.

Researchers may read these pages; only curators may change anything.
"""

from typing import Any, NamedTuple
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import (
    HtmxRequest,
    get_conversation_for_reader,
    get_physician_for_curator_rw,
    require_curator,
    require_staff_reader,
)
from annotation.forms.workspace import AssignForm, ExternalLinkForm, StatusForm
from annotation.models import Assignment, Physician
from annotation.selectors import curation
from annotation.selectors.consensus import tallies
from annotation.selectors.gold import GoldTally, gold_tallies
from annotation.services.assignments import assignments_create, assignments_plan
from annotation.services.external import LinkPlan, external_link, external_link_plan
from annotation.services.vetting import TRANSITIONS, physician_status_set
from annotation.views.rendering import wants_fragment

ASSIGN_TEMPLATE = "annotation/assignments.html"
# Per-conversation reasons shown after an assignment; the rest are counted.
SHOWN_REASONS = 10


class VettingRow(NamedTuple):
    """A physician on the vetting page and the statuses a curator may move them to."""

    physician: Physician
    next_statuses: tuple[str, ...]
    # Their answered gold items (shown beside "Make active" for physicians on trial).
    gold: GoldTally | None = None


def _assign_form(data=None) -> AssignForm:
    return AssignForm(
        data,
        subsets=curation.subset_names(),
        specialties=curation.specialties(),
        languages=curation.languages(),
    )


def _selection(form: AssignForm) -> tuple[list[int], int, list[Physician]]:
    """(conversation ids, up to the limit; how many match in all; matching physicians)."""
    data = form.cleaned_data
    conversations = curation.conversations_to_assign(
        kind=data["kind"], theme=data["theme"], subset=data["subset"], status=data["status"]
    )
    ids = list(conversations.values_list("id", flat=True)[: data["limit"]])
    physicians = curation.physicians_to_assign(
        specialty=data["specialty"], language=data["language"], statuses=form.statuses()
    )
    return ids, conversations.count(), physicians


@login_required
@require_http_methods(["GET", "POST"])
def assignments(request: HtmxRequest) -> HttpResponse:
    role = require_staff_reader(request)
    if request.method == "POST":
        curator = require_curator(request)
        form = _assign_form(request.POST)
        if form.is_valid():
            ids, _, physicians = _selection(form)
            try:
                summary = assignments_create(
                    kind=form.cleaned_data["kind"],
                    conversation_ids=ids,
                    physicians=physicians,
                    per_item=form.cleaned_data["per_item"],
                    assigned_by=curator,
                    condition=form.cleaned_data["condition"],
                )
            except IntegrityError:
                # Another curator gave out some of the same tasks in the same moment; the unique
                # constraints refused the duplicates and the whole batch was rolled back.
                messages.error(
                    request,
                    gettext("Someone assigned some of these items at the same moment. Nothing changed: try again."),
                )
            else:
                (messages.success if summary.created else messages.warning)(request, str(summary).capitalize() + ".")
                for reason in summary.reasons[:SHOWN_REASONS]:
                    messages.warning(request, reason + ".")
                if len(summary.reasons) > SHOWN_REASONS:
                    more = len(summary.reasons) - SHOWN_REASONS
                    messages.warning(request, gettext("… and %(more)s more conversations.") % {"more": more})
            # Back to the same choices, previewed again: what is left to do shows at once.
            fields = {name: form.data.get(name, "") for name in form.fields}
            return redirect(f"{reverse('assignments')}?{urlencode(fields)}")
    else:
        form = _assign_form(request.GET or None)
    preview = None
    if form.is_bound and form.is_valid():
        ids, matching, physicians = _selection(form)
        chosen = [(name, form.data.get(name, "")) for name in form.fields]
        plan = assignments_plan(
            kind=form.cleaned_data["kind"],
            conversation_ids=ids,
            physicians=physicians,
            per_item=form.cleaned_data["per_item"],
        )
        preview = {
            "conversations": len(ids),
            "matching": matching,
            "physicians": physicians,
            "external": curation.external_physicians_left_out(statuses=form.statuses()),
            "fields": chosen,
            "plan": plan,
            "kind_label": Assignment.Kind(form.cleaned_data["kind"]).label,
            "reasons": (plan.empty + plan.reasons)[:SHOWN_REASONS],
            "more_reasons": max(0, len(plan.empty) + len(plan.reasons) - SHOWN_REASONS),
        }
    context: dict[str, Any] = {
        "form": form,
        "preview": preview,
        "can_write": role == Physician.Role.CURATOR,
        "kinds": Assignment.Kind.choices,
    }
    if wants_fragment(request):
        return render(request, f"{ASSIGN_TEMPLATE}#preview", context)
    context["progress"] = curation.progress()
    context["external"] = curation.external_physicians_left_out()
    context["withdrawn"] = curation.withdrawn_tasks()
    return render(request, ASSIGN_TEMPLATE, context)


@login_required
@require_GET
def physicians(request: HtmxRequest) -> HttpResponse:
    role = require_staff_reader(request)
    status = request.GET.get("status", "")
    if status not in Physician.Status.values:
        status = ""
    listed = list(curation.physicians_for_vetting(status)[:500])
    trial = gold_tallies(p.id for p in listed if p.status == Physician.Status.TRIAL)
    rows = [VettingRow(p, TRANSITIONS[p.status], trial.get(p.id)) for p in listed]
    context = {
        "rows": rows,
        "external": curation.external_physicians().count(),
        "status": status,
        "statuses": Physician.Status.choices,
        "can_write": role == Physician.Role.CURATOR,
        "gold_accuracy": settings.GOLD_PROMOTION_ACCURACY,
        "gold_min_items": settings.GOLD_MIN_ITEMS,
    }
    return render(request, "annotation/physicians.html", context)


@login_required
@require_POST
def physician_status(request: HtmxRequest, code) -> HttpResponse:
    _, physician = get_physician_for_curator_rw(request, code)
    form = StatusForm(request.POST)
    if form.is_valid():
        try:
            outcome = physician_status_set(physician=physician, status=form.cleaned_data["status"])
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            text = gettext("%(physician)s is now %(status)s.") % {"physician": physician, "status": physician.status}
            if physician.status == Physician.Status.REMOVED:
                text += gettext(
                    " %(flagged)s criteria flagged for review, %(cancelled)s open tasks cancelled,"
                    " %(recounted)s consensus items re-decided without their votes."
                ) % {"flagged": outcome.flagged, "cancelled": outcome.cancelled, "recounted": outcome.recounted}
            messages.success(request, text)
    else:
        messages.error(request, gettext("Choose a status."))
    return redirect("physicians")


@login_required
@require_GET
def consensus_tally(request: HtmxRequest, code) -> HttpResponse:
    conversation = get_conversation_for_reader(request, code)
    return render(
        request, "annotation/consensus_tally.html", {"conversation": conversation, "tallies": tallies(conversation)}
    )


# External physicians listed on the link page; the rest are counted.
SHOWN_EXTERNAL = 50


@login_required
@require_http_methods(["GET", "POST"])
def physician_link(request: HtmxRequest) -> HttpResponse:
    """Link an external physician (from an imported file) to an account: preview, then confirm."""
    require_curator(request)
    if request.method == "POST":
        form = ExternalLinkForm(request.POST)
        if form.is_valid():
            external, user = form.cleaned_data["external"], form.cleaned_data["username"]
            name = str(external)
            try:
                done = external_link(external=external, user=user)
            except ValidationError:
                pass  # the preview below says why, in the same words
            else:
                messages.success(
                    request,
                    ngettext(
                        "%(name)s is now %(username)s: %(labels)s label kept. They can receive tasks from now on.",
                        "%(name)s is now %(username)s: %(labels)s labels kept. They can receive tasks from now on.",
                        done.labels,
                    )
                    % {"name": name, "username": user.get_username(), "labels": done.labels},
                )
                return redirect("physicians")
    else:
        form = ExternalLinkForm(request.GET or None)
    plan: LinkPlan | None = None
    problem = ""
    if form.is_bound and form.is_valid():
        try:
            plan = external_link_plan(external=form.cleaned_data["external"], user=form.cleaned_data["username"])
        except ValidationError as exc:
            problem = " ".join(exc.messages)
    externals = curation.external_physicians()
    context = {
        "form": form,
        "plan": plan,
        "problem": problem,
        "externals": externals[:SHOWN_EXTERNAL],
        "external_count": externals.count(),
        "fields": [(name, form.data.get(name, "")) for name in form.fields] if form.is_bound else [],
    }
    return render(request, "annotation/physician_link.html", context)
