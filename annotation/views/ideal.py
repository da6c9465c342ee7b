"""The ideal-response editor, under the condition the task sets (no reference, or references shown)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from annotation.access import HtmxRequest, get_task
from annotation.forms.workspace import IdealResponseForm
from annotation.models import Draft, IdealResponse
from annotation.selectors.tasks import next_task
from annotation.services.guidelines import guideline_for_task
from annotation.services.ideal import ideal_response_save
from annotation.services.text_drafts import draft_discard, ideal_key
from annotation.services.time_on_task import task_answered, task_opened
from annotation.task_kinds.ideal_response import KIND as IDEAL_RESPONSE
from annotation.views.next_task import redirect_to_next_task
from annotation.views.rendering import prefetch_markdown


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def ideal_editor(request: HtmxRequest, code) -> HttpResponse:
    task = get_task(request, code, IDEAL_RESPONSE)
    with_reference = task.condition == IdealResponse.Condition.WITH_REFERENCE
    key = ideal_key(task.conversation.code)
    restored = None
    if request.method == "POST":
        form = IdealResponseForm(request.POST)
        if form.is_valid():
            ideal_response_save(task=task, text=form.cleaned_data["text"])
            task_answered(task)
            draft_discard(physician=task.physician, key=key)
            if request.POST.get("action") == "next":
                return redirect_to_next_task(request, task, gettext("Ideal response saved."))
            messages.success(request, gettext("Ideal response saved. You can keep improving it here."))
            return redirect("ideal_editor", code=task.conversation.code)
    else:
        task_opened(task)
        saved = IdealResponse.objects.filter(
            conversation=task.conversation, author=task.physician, from_dataset=False
        ).first()
        # A draft newer than the saved text is what the physician was last writing.
        restored = Draft.objects.filter(physician=task.physician, key=key).first()
        if restored is not None and saved is not None and restored.updated <= saved.created:
            restored = None
        text = restored.text if restored is not None else (saved.text if saved else "")
        form = IdealResponseForm(initial={"text": text})
    context = {
        "task": task,
        "conversation": task.conversation,
        "form": form,
        "with_reference": with_reference,
        "draft_key": key,
        "restored": restored,
        "next_task": next_task(task.physician, kind=task.kind, after=task),
        # Only what the task names, never the dataset's own ideal response or other physicians'.
        "references": list(task.reference_responses.order_by("id").only("id", "text")) if with_reference else [],
        **guideline_for_task(physician=task.physician, kind=task.kind),
    }
    prefetch_markdown(context)
    return render(request, "annotation/ideal_editor.html", context)
