"""The rubric editor: the transcript beside the criteria, edited in place."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import HtmxRequest, get_criterion_for_author_rw, get_task, get_task_rw
from annotation.forms.workspace import CriterionForm
from annotation.models import Assignment, Criterion
from annotation.selectors.rubric import editor_row, rubric_view
from annotation.selectors.tasks import next_task
from annotation.services.guidelines import guideline_for_task
from annotation.services.rubric import criterion_create, criterion_delete, criterion_update, rubric_submit
from annotation.services.text_drafts import criterion_key, draft_discard, draft_text
from annotation.services.time_on_task import task_answered, task_opened
from annotation.task_kinds.rubric import KIND as RUBRIC
from annotation.views.next_task import redirect_to_next_task
from annotation.views.rendering import prefetch_markdown, wants_fragment

TEMPLATE = "annotation/rubric_editor.html"


def _new_form(task: Assignment) -> CriterionForm:
    """An empty add form, or the criterion text the physician was writing when they left."""
    text = draft_text(physician=task.physician, key=criterion_key(task.conversation.code))
    return CriterionForm(initial={"text": text}) if text else CriterionForm()


def _context(task: Assignment, **extra) -> dict:
    return {
        "task": task,
        "conversation": task.conversation,
        "rubric": rubric_view(conversation=task.conversation, physician=task.physician),
        "form": _new_form(task),
        "draft_key": criterion_key(task.conversation.code),
        **extra,
    }


def _fragment(request: HtmxRequest, task: Assignment, name: str, **extra) -> HttpResponse:
    """A fragment plus, out of band, the summary (running total and warnings)."""
    context = _context(task, oob=True, **extra)
    shown = extra.get("criterion")
    if shown is not None:
        # The rubric's copy carries the criterion's number in the list.
        context["criterion"] = next((c for c in context["rubric"].criteria if c.id == shown.id), shown)
    return render(request, f"{TEMPLATE}#{name}", context)


def _editor_url(task: Assignment, criterion_id: int | None = None) -> str:
    url = reverse("rubric_editor", args=[task.conversation.code])
    return f"{url}#criterion-{criterion_id}" if criterion_id else url


@never_cache
@login_required
@require_GET
def rubric_editor(request: HtmxRequest, code) -> HttpResponse:
    task = get_task(request, code, RUBRIC)
    task_opened(task)
    context = _context(task, **guideline_for_task(physician=task.physician, kind=task.kind))
    if task.is_done:
        context["next_task"] = next_task(task.physician, kind=task.kind, after=task)
    prefetch_markdown(context)
    return render(request, TEMPLATE, context)


@login_required
@require_POST
def criterion_add(request: HtmxRequest, code) -> HttpResponse:
    task = get_task_rw(request, code, RUBRIC)
    form = CriterionForm(request.POST)
    draft_key = criterion_key(task.conversation.code)
    if not form.is_valid():
        if wants_fragment(request):
            return render(request, f"{TEMPLATE}#add-form", {"task": task, "form": form, "draft_key": draft_key})
        return render(request, TEMPLATE, _context(task, form=form))
    criterion = criterion_create(physician=task.physician, conversation=task.conversation, **form.cleaned_data)
    task_answered(task)
    draft_discard(physician=task.physician, key=draft_key)
    if wants_fragment(request):
        # The new, empty form takes the focus on its text field: the next criterion is written there.
        return _fragment(
            request, task, "added", criterion=editor_row(criterion, task.physician), form=CriterionForm(), refocus=True
        )
    messages.success(request, gettext("Criterion added."))
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
            task_answered(task)
            draft_discard(physician=task.physician, key=criterion_key(task.conversation.code, criterion.id))
            if wants_fragment(request):
                return _fragment(request, task, "updated", criterion=editor_row(criterion, task.physician))
            messages.success(request, gettext("Criterion saved."))
            return redirect(_editor_url(task, criterion.id))
    else:
        initial = _initial(criterion)
        text = draft_text(physician=task.physician, key=criterion_key(task.conversation.code, criterion.id))
        form = CriterionForm(initial={**initial, "text": text} if text else initial)
    if wants_fragment(request):
        context = {"task": task, "criterion": criterion, "edit_form": form}
        return render(request, f"{TEMPLATE}#criterion-form", context)
    return render(request, TEMPLATE, _context(task, editing=criterion.id, edit_form=form))


@never_cache
@login_required
@require_GET
def criterion_row(request: HtmxRequest, code, criterion_id: int) -> HttpResponse:
    """One criterion as displayed: what "Cancel" puts back in place of its edit form."""
    task, criterion = get_criterion_for_author_rw(request, code, criterion_id)
    if not wants_fragment(request):
        return redirect(_editor_url(task, criterion.id))
    return render(request, f"{TEMPLATE}#criterion", {"task": task, "criterion": editor_row(criterion, task.physician)})


@login_required
@require_POST
def criterion_remove(request: HtmxRequest, code, criterion_id: int) -> HttpResponse:
    task, criterion = get_criterion_for_author_rw(request, code, criterion_id)
    criterion_delete(physician=task.physician, criterion=criterion)
    task_answered(task)
    if wants_fragment(request):
        return _fragment(request, task, "removed")
    messages.success(request, gettext("Criterion deleted. Its text stays in the edit history."))
    return redirect(_editor_url(task))


@login_required
@require_POST
def rubric_submit_view(request: HtmxRequest, code) -> HttpResponse:
    """Submit, once the physician has seen what still looks wrong: submitting is final."""
    task = get_task_rw(request, code, RUBRIC)
    rubric = rubric_view(conversation=task.conversation, physician=task.physician)
    warned = [c for c in rubric.criteria if c.sign_warning]
    if warned and request.POST.get("confirm") != "sign":
        context = _context(task, rubric=rubric, confirm_submit=warned)
        return render(request, TEMPLATE, context, status=409)
    try:
        rubric_submit(task=task)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(_editor_url(task))
    task_answered(task, sign_warnings=len(warned))
    done = gettext("Rubric for %(prompt_id)s… submitted. Thank you.") % {"prompt_id": task.conversation.prompt_id[:8]}
    return redirect_to_next_task(request, task, done)
