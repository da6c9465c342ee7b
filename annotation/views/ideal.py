"""The ideal-response editor, under the condition the task sets (no reference, or references shown)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from annotation.access import HtmxRequest, get_task
from annotation.forms.workspace import IdealResponseForm
from annotation.models import Assignment, IdealResponse
from annotation.services.ideal import ideal_response_save


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def ideal_editor(request: HtmxRequest, code) -> HttpResponse:
    task = get_task(request, code, Assignment.Kind.IDEAL_RESPONSE)
    with_reference = task.condition == IdealResponse.Condition.WITH_REFERENCE
    if request.method == "POST":
        form = IdealResponseForm(request.POST)
        if form.is_valid():
            ideal_response_save(task=task, text=form.cleaned_data["text"])
            messages.success(request, "Ideal response saved. You can keep improving it here.")
            return redirect("ideal_editor", code=task.conversation.code)
    else:
        saved = (
            IdealResponse.objects.filter(conversation=task.conversation, author=task.physician, from_dataset=False)
            .values_list("text", flat=True)
            .first()
        )
        form = IdealResponseForm(initial={"text": saved or ""})
    context = {
        "task": task,
        "conversation": task.conversation,
        "form": form,
        "with_reference": with_reference,
        # Only what the task names, never the dataset's own ideal response or other physicians'.
        "references": list(task.reference_responses.order_by("id").only("id", "text")) if with_reference else [],
    }
    return render(request, "annotation/ideal_editor.html", context)
