"""Consensus voting: does each catalogue criterion that fits the theme apply to this conversation?"""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from annotation.access import HtmxRequest, get_consensus_criterion_for_task, get_task
from annotation.forms.workspace import VoteForm
from annotation.models import Assignment
from annotation.selectors.consensus import ballot
from annotation.services.consensus import vote_cast
from annotation.views.rendering import wants_fragment

TEMPLATE = "annotation/votes.html"


def _progress(rows) -> dict:
    return {"voted": sum(1 for r in rows if r.applies is not None), "total": len(rows)}


@never_cache
@login_required
@require_GET
def votes(request: HtmxRequest, code) -> HttpResponse:
    task = get_task(request, code, Assignment.Kind.CONSENSUS_VOTE)
    rows = ballot(physician=task.physician, conversation=task.conversation)
    return render(request, TEMPLATE, {"task": task, "conversation": task.conversation, "rows": rows, **_progress(rows)})


@login_required
@require_POST
def vote(request: HtmxRequest, code, consensus_code) -> HttpResponse:
    task = get_task(request, code, Assignment.Kind.CONSENSUS_VOTE)
    entry = get_consensus_criterion_for_task(task, consensus_code)
    form = VoteForm(request.POST)
    url = reverse("votes", args=[task.conversation.code])
    if not form.is_valid():
        # Only a forged or broken request gets here: the page offers two buttons.
        return HttpResponse("Say whether it applies: yes or no.", status=400)
    vote_cast(
        physician=task.physician,
        conversation=task.conversation,
        consensus_criterion=entry,
        applies=form.cleaned_data["applies"] == "yes",
    )
    if not wants_fragment(request):
        return redirect(f"{url}#vote-{entry.code}")
    task.refresh_from_db(fields=["status", "completed"])
    rows = ballot(physician=task.physician, conversation=task.conversation)
    row = next(r for r in rows if r.consensus_criterion.id == entry.id)
    return render(request, f"{TEMPLATE}#voted", {"task": task, "row": row, "oob": True, **_progress(rows)})
