"""Labeling: one response and one criterion at a time, met or not met, next item without a reload."""

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import push_url

from annotation.access import HtmxRequest, get_task, require_working_physician, task_conflict
from annotation.forms.workspace import LabelForm
from annotation.models import Assignment, CantJudge, PhysicianLabel
from annotation.selectors.gold import label_feedback
from annotation.selectors.tasks import following_label_code, label_position, next_label_code, next_task
from annotation.services.assignments import label_task_withdraw
from annotation.services.cant_judge import cant_judge_label
from annotation.services.guidelines import guideline_for_task
from annotation.services.labels import label_record
from annotation.services.text_drafts import draft_discard, draft_text, label_comment_key
from annotation.services.time_on_task import task_answered, task_opened
from annotation.task_kinds.label import CONFLICT_NOTE
from annotation.task_kinds.label import KIND as LABEL
from annotation.views.rendering import render_page, wants_fragment

TEMPLATE = "annotation/label.html"


def _context(task: Assignment, form: LabelForm | None = None) -> dict:
    # The physician's own earlier answer, if any; never anyone else's label or the grader's decision.
    # Labeling marks the task done in the same transaction, so an open task has no label to read.
    own: Mapping[str, Any] | None = None
    unsure: Mapping[str, Any] | None = None
    if task.is_done and task.response_id is not None and task.criterion_id is not None:
        item = {"physician_id": task.physician_id, "response_id": task.response_id, "criterion_id": task.criterion_id}
        own = PhysicianLabel.objects.filter(**item).values("met", "comment").first()
        if own is None:
            unsure = CantJudge.objects.filter(**item, consensus_criterion=None).values("reason", "note").first()
    key = label_comment_key(task.code)
    # The comment the physician was writing (kept as a draft through Skip and Previous), else their saved one.
    comment = draft_text(physician=task.physician, key=key)
    if comment is None:
        comment = (own or {}).get("comment") or (unsure or {}).get("note") or ""
    return {
        "task": task,
        "conversation": task.conversation,
        "position": label_position(task),
        "form": form,
        "own": own,
        "unsure": unsure,
        "comment": comment,
        "draft_key": key,
        "reasons": CantJudge.Reason.choices,
        # A gold item's known answer and rationale: read only once the physician has answered.
        "gold": label_feedback(task) if own is not None else None,
    }


# Labeling pages change with every answer: the browser must ask again rather than show an
# old copy from its history (Back would otherwise show "1 of 12 labeled" after the second).
@never_cache
@login_required
@require_GET
def label_next(request: HtmxRequest) -> HttpResponse:
    """The first open labeling item, or the all-done page."""
    physician = require_working_physician(request)
    code = next_label_code(physician, LABEL.value)
    if code:
        return redirect("label_item", code=code)
    return render(request, TEMPLATE, {"task": None, "next_task": next_task(physician, kind=LABEL.value)})


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def label_item(request: HtmxRequest, code) -> HttpResponse:
    task = get_task(request, code, LABEL)
    if task_conflict(task):
        # Opening the page only says why; a POST (the page's button, or an answer sent anyway)
        # takes the item off the physician's list. A GET writes nothing.
        return _withdrawn(request, task, withdraw=request.method == "POST")
    if request.method == "POST":
        form = LabelForm(request.POST)
        if form.is_valid():
            if form.cant_judge:
                note = form.cleaned_data["note"] or form.cleaned_data["comment"]
                cant_judge_label(task=task, reason=form.cleaned_data["reason"], note=note)
            else:
                label_record(task=task, met=form.cleaned_data["met"] == "yes", comment=form.cleaned_data["comment"])
            task_answered(task)
            draft_discard(physician=task.physician, key=label_comment_key(task.code))
            return _after_label(request, task)
        return _render(request, task, form)
    task_opened(task)
    return render_page(
        request,
        TEMPLATE,
        {**_context(task, None), **guideline_for_task(physician=task.physician, kind=task.kind)},
        fragment="label-item",
    )


def _withdrawn(request: HtmxRequest, task: Assignment, *, withdraw: bool) -> HttpResponse:
    """Say why the item cannot be labeled and where to go next, instead of a bare refusal;
    with `withdraw`, take an open one off the physician's list for the curator to reassign."""
    if withdraw and task.is_open:
        # Made impossible after it was given out (e.g. a task created by hand in the admin).
        label_task_withdraw(task=task, note=CONFLICT_NOTE)
    context = {
        "task": None,
        "withdrawn": task,
        # Not this one again, while it is still open.
        "next_code": following_label_code(task),
        "next_task": next_task(task.physician, kind=LABEL.value, after=task),
    }
    # A refusal on a whole page; a fragment swapped in after the previous item stays a 200 so htmx
    # shows it, and so does the answer to the page's own button, which did what it asked.
    asked = request.method == "POST" and request.POST.get("withdraw") == "yes"
    status = 200 if wants_fragment(request) or asked else 403
    return render_page(request, TEMPLATE, context, fragment="label-item", status=status)


def _render(request: HtmxRequest, task: Assignment, form: LabelForm | None) -> HttpResponse:
    return render_page(request, TEMPLATE, _context(task, form), fragment="label-item")


def _after_label(request: HtmxRequest, task: Assignment) -> HttpResponse:
    if task.response_id is not None and label_feedback(task) is not None:
        # A gold item: the physician reads its known answer and rationale before moving on.
        url = reverse("label_item", args=[task.code])
        if not wants_fragment(request):
            return redirect(url)
        return push_url(_render(request, task, None), url)
    following = following_label_code(task)
    url = reverse("label_item", args=[following]) if following else reverse("label_next")
    if not wants_fragment(request):
        return redirect(url)
    # Swap in the next item and put its address in the location bar, so reload and back work.
    if following:
        task = get_task(request, following, LABEL)
        # Still the answer's POST: the next item, if impossible, is taken off the list now.
        response = _withdrawn(request, task, withdraw=True) if task_conflict(task) else _render(request, task, None)
    else:
        context = {"task": None, "next_task": next_task(task.physician, kind=LABEL.value, after=task)}
        response = render(request, f"{TEMPLATE}#label-item", context)
    return push_url(response, url)
