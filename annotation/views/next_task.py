"""Every finished task leads to the next one: of the same kind first, then any kind, then home."""

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext

from annotation.access import HtmxRequest
from annotation.models import Assignment
from annotation.selectors.tasks import next_task


def redirect_to_next_task(request: HtmxRequest, task: Assignment, done: str) -> HttpResponse:
    following = next_task(task.physician, kind=task.kind, after=task)
    if following is None:
        messages.success(request, gettext("%(done)s You have no open tasks left.") % {"done": done})
        return redirect("home")
    where = f" Next: {following.label.lower()}." if following.other_kind else ""
    messages.success(request, done + where)
    return redirect(following.url)
