"""Consensus voting: does each catalogue criterion that fits the theme apply to this conversation?"""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from annotation.access import HtmxRequest, get_consensus_criterion_for_task, get_task
from annotation.forms.workspace import VoteForm
from annotation.models import Assignment, CantJudge
from annotation.selectors.consensus import ballot
from annotation.selectors.tasks import next_task
from annotation.services.cant_judge import cant_judge_vote
from annotation.services.consensus import vote_cast
from annotation.services.guidelines import guideline_for_task
from annotation.services.time_on_task import task_answered, task_opened
from annotation.task_kinds.consensus_vote import KIND as CONSENSUS_VOTE
from annotation.views.rendering import prefetch_markdown, wants_fragment

TEMPLATE = "annotation/votes.html"


def _context(task: Assignment, rows) -> dict:
    return {
        "task": task,
        "conversation": task.conversation,
        "rows": rows,
        "voted": sum(1 for r in rows if r.answered),
        "total": len(rows),
        "reasons": CantJudge.Reason.choices,
        "next_task": next_task(task.physician, kind=task.kind, after=task),
    }


@never_cache
@login_required
@require_GET
def votes(request: HtmxRequest, code) -> HttpResponse:
    task = get_task(request, code, CONSENSUS_VOTE)
    task_opened(task)
    rows = ballot(physician=task.physician, conversation=task.conversation)
    context = _context(task, rows)
    context.update(guideline_for_task(physician=task.physician, kind=task.kind))
    # Focus starts on the first criterion still to answer, so the keys work at once.
    context["first_open"] = next((r.consensus_criterion.id for r in rows if not r.answered), None)
    prefetch_markdown(context)
    return render(request, TEMPLATE, context)


@login_required
@require_POST
def vote(request: HtmxRequest, code, consensus_code) -> HttpResponse:
    task = get_task(request, code, CONSENSUS_VOTE)
    entry = get_consensus_criterion_for_task(task, consensus_code)
    form = VoteForm(request.POST)
    url = reverse("votes", args=[task.conversation.code])
    if not form.is_valid():
        if wants_fragment(request):
            rows = ballot(physician=task.physician, conversation=task.conversation)
            row = next(r for r in rows if r.consensus_criterion.id == entry.id)
            context = {**_context(task, rows), "row": row, "row_errors": form.errors}
            return render(request, f"{TEMPLATE}#row", context)
        return HttpResponse(" ".join(str(e) for errors in form.errors.values() for e in errors), status=400)
    if form.cant_judge:
        cant_judge_vote(
            physician=task.physician,
            conversation=task.conversation,
            consensus_criterion=entry,
            reason=form.cleaned_data["reason"],
            note=form.cleaned_data["note"],
        )
    else:
        vote_cast(
            physician=task.physician,
            conversation=task.conversation,
            consensus_criterion=entry,
            applies=form.cleaned_data["applies"] == "yes",
        )
    task_answered(task)
    if not wants_fragment(request):
        return redirect(f"{url}#vote-{entry.code}")
    task.refresh_from_db(fields=["status", "completed"])
    rows = ballot(physician=task.physician, conversation=task.conversation)
    row = next(r for r in rows if r.consensus_criterion.id == entry.id)
    return render(request, f"{TEMPLATE}#voted", {**_context(task, rows), "row": row, "oob": True})
