"""Guidelines per kind of task: read by physicians (linked from every task page), written by curators."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods, require_POST

from annotation.access import HtmxRequest, physician_for, require_curator, require_role, require_working_physician
from annotation.models import Assignment, Guideline, Physician
from annotation.services.guidelines import guideline_mark_read, guideline_save

ROLES = (Physician.Role.PHYSICIAN, Physician.Role.CURATOR, Physician.Role.RESEARCHER)


class GuidelineForm(forms.Form):
    text = forms.CharField(
        required=False, max_length=50000, widget=forms.Textarea(attrs={"rows": 18}), label="Guidelines (Markdown)"
    )


def _kind(kind: str) -> str:
    if kind not in Assignment.Kind.values:
        raise Http404("No such kind of task")
    return kind


@login_required
def guidelines(request: HtmxRequest) -> HttpResponse:
    role = require_role(request, *ROLES)
    found = {g.kind: g for g in Guideline.objects.all()}
    rows = [(value, label, found.get(value)) for value, label in Assignment.Kind.choices]
    return render(request, "annotation/guidelines.html", {"rows": rows, "can_write": role == Physician.Role.CURATOR})


@login_required
@require_http_methods(["GET", "POST"])
def guideline_edit(request: HtmxRequest, kind: str) -> HttpResponse:
    curator = require_curator(request)
    kind = _kind(kind)
    current = Guideline.objects.filter(kind=kind).first()
    form = GuidelineForm(request.POST or None, initial={"text": current.text if current else ""})
    if request.method == "POST" and form.is_valid():
        guideline_save(kind=kind, text=form.cleaned_data["text"], by=curator or physician_for(request.user))
        messages.success(request, gettext("Guidelines for “%(kind)s” saved.") % {"kind": Assignment.Kind(kind).label})
        return redirect(f"/guidelines/#guideline-{kind}")
    label = Assignment.Kind(kind).label
    return render(request, "annotation/guideline_edit.html", {"form": form, "kind": kind, "label": label})


@login_required
@require_POST
def guideline_read(request: HtmxRequest, kind: str) -> HttpResponse:
    physician = require_working_physician(request)
    guideline_mark_read(physician=physician, kind=_kind(kind))
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "/"
    return redirect(back)
