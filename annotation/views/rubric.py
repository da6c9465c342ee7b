"""The rubric editor: the transcript beside the criteria, edited in place."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import HtmxRequest, get_criterion_for_author_rw, get_rubric_task_rw, get_task
from annotation.forms.workspace import CriterionForm
from annotation.models import Assignment, Criterion
from annotation.selectors.rubric import annotate_criterion, rubric_view
from annotation.services.rubric import criterion_create, criterion_delete, criterion_update, rubric_submit
from annotation.views.rendering import wants_fragment

TEMPLATE = "annotation/rubric_editor.html"


def _context(task: Assignment, **extra) -> dict:
    return {
        "task": task,
        "conversation": task.conversation,
        "rubric": rubric_view(conversation=task.conversation, physician=task.physician),
        "form": CriterionForm(),
        **extra,
    }


def _fragment(request: HtmxRequest, task: Assignment, name: str, **extra) -> HttpResponse:
    """A fragment plus, out of band, the summary (running total and warnings)."""
    return render(request, f"{TEMPLATE}#{name}", _context(task, oob=True, **extra))


def _editor_url(task: Assignment, criterion_id: int | None = None) -> str:
    url = reverse("rubric_editor", args=[task.conversation.code])
    return f"{url}#criterion-{criterion_id}" if criterion_id else url


@never_cache
@login_required
@require_GET
def rubric_editor(request: HtmxRequest, code) -> HttpResponse:
    task = get_task(request, code, Assignment.Kind.RUBRIC)
    return render(request, TEMPLATE, _context(task))


@login_required
@require_POST
def criterion_add(request: HtmxRequest, code) -> HttpResponse:
    task = get_rubric_task_rw(request, code)
    form = CriterionForm(request.POST)
    if not form.is_valid():
        if wants_fragment(request):
            return render(request, f"{TEMPLATE}#add-form", {"task": task, "form": form})
        return render(request, TEMPLATE, _context(task, form=form))
    criterion = criterion_create(physician=task.physician, conversation=task.conversation, **form.cleaned_data)
    if wants_fragment(request):
        return _fragment(request, task, "added", criterion=annotate_criterion(criterion, task.physician))
    messages.success(request, "Criterion added.")
    return redirect(_editor_url(task, criterion.id))


def _initial(criterion: Criterion) -> dict:
    return {"text": criterion.text, "points": criterion.points, "axis": criterion.axis}


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def criterion_edit(request: HtmxRequest, code, criterion_id: int) -> HttpResponse:
    task, criterion = get_criterion_for_author_rw(request, code, criterion_id)
    if request.method == "POST":
        form = CriterionForm(request.POST)
        if form.is_valid():
            criterion_update(physician=task.physician, criterion=criterion, **form.cleaned_data)
            if wants_fragment(request):
                return _fragment(request, task, "updated", criterion=annotate_criterion(criterion, task.physician))
            messages.success(request, "Criterion saved.")
            return redirect(_editor_url(task, criterion.id))
    else:
        form = CriterionForm(initial=_initial(criterion))
    if wants_fragment(request):
        return render(request, f"{TEMPLATE}#criterion-form", {"task": task, "criterion": criterion, "edit_form": form})
    return render(request, TEMPLATE, _context(task, editing=criterion.id, edit_form=form))


@never_cache
@login_required
@require_GET
def criterion_row(request: HtmxRequest, code, criterion_id: int) -> HttpResponse:
    """One criterion as displayed: what "Cancel" puts back in place of its edit form."""
    task, criterion = get_criterion_for_author_rw(request, code, criterion_id)
    if not wants_fragment(request):
        return redirect(_editor_url(task, criterion.id))
    return render(
        request, f"{TEMPLATE}#criterion", {"task": task, "criterion": annotate_criterion(criterion, task.physician)}
    )


@login_required
@require_POST
def criterion_remove(request: HtmxRequest, code, criterion_id: int) -> HttpResponse:
    task, criterion = get_criterion_for_author_rw(request, code, criterion_id)
    criterion_delete(physician=task.physician, criterion=criterion)
    if wants_fragment(request):
        return _fragment(request, task, "removed")
    messages.success(request, "Criterion deleted. Its text stays in the edit history.")
    return redirect(_editor_url(task))


@login_required
@require_POST
def rubric_submit_view(request: HtmxRequest, code) -> HttpResponse:
    task = get_rubric_task_rw(request, code)
    try:
        rubric_submit(task=task)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(_editor_url(task))
    messages.success(request, f"Rubric for {task.conversation.prompt_id[:8]}… submitted. Thank you.")
    return redirect("home")
