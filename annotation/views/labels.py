"""Labeling: one response and one criterion at a time, met or not met, next item without a reload."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import push_url

from annotation.access import HtmxRequest, get_label_task, require_working_physician
from annotation.forms.workspace import LabelForm
from annotation.models import Assignment, PhysicianLabel
from annotation.selectors.tasks import following_label_code, label_position, next_label_code
from annotation.services.labels import label_record
from annotation.views.rendering import render_page, wants_fragment

TEMPLATE = "annotation/label.html"


def _context(task: Assignment, form: LabelForm | None = None) -> dict:
    # The physician's own earlier answer, if any; never anyone else's label or the grader's decision.
    # Labeling marks the task done in the same transaction, so an open task has no label to read.
    own = None
    if task.is_done:
        own = (
            PhysicianLabel.objects.filter(
                physician_id=task.physician_id, response_id=task.response_id, criterion_id=task.criterion_id
            )
            .values("met", "comment")
            .first()
        )
    return {
        "task": task,
        "conversation": task.conversation,
        "position": label_position(task),
        "form": form,
        "own": own,
    }


@login_required
@require_GET
def label_next(request: HtmxRequest) -> HttpResponse:
    """The first open labeling item, or the all-done page."""
    physician = require_working_physician(request)
    code = next_label_code(physician)
    if code:
        return redirect("label_item", code=code)
    return render(request, TEMPLATE, {"task": None})


@login_required
@require_http_methods(["GET", "POST"])
def label_item(request: HtmxRequest, code) -> HttpResponse:
    task = get_label_task(request, code)
    if request.method == "POST":
        form = LabelForm(request.POST)
        if form.is_valid():
            label_record(task=task, met=form.cleaned_data["met"] == "yes", comment=form.cleaned_data["comment"])
            return _after_label(request, task)
        return _render(request, task, form)
    return _render(request, task, None)


def _render(request: HtmxRequest, task: Assignment, form: LabelForm | None) -> HttpResponse:
    return render_page(request, TEMPLATE, _context(task, form), fragment="label-item")


def _after_label(request: HtmxRequest, task: Assignment) -> HttpResponse:
    following = following_label_code(task)
    url = reverse("label_item", args=[following]) if following else reverse("label_next")
    if not wants_fragment(request):
        return redirect(url)
    # Swap in the next item and put its address in the location bar, so reload and back work.
    if following:
        response = _render(request, get_label_task(request, following), None)
    else:
        response = render(request, f"{TEMPLATE}#label-item", {"task": None})
    return push_url(response, url)
