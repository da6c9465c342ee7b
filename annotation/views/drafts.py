"""Drafting a new multi-turn conversation in the browser (red-teaming)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from annotation.access import HtmxRequest, require_drafter
from annotation.forms.workspace import DraftForm
from annotation.services.drafts import conversation_draft_create
from annotation.views.rendering import render_page, wants_fragment


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def draft(request: HtmxRequest) -> HttpResponse:
    author = require_drafter(request)
    if request.method == "GET":
        return render(request, "annotation/draft.html", {"form": DraftForm()})
    form = DraftForm(request.POST)
    action = request.POST.get("action", "save")
    if action == "add":
        form.add_turn()
    elif action == "remove":
        form.remove_turn()
    elif form.is_valid():
        outcome = conversation_draft_create(author=author, theme=form.theme, messages=form.messages())
        task = outcome.rubric_task
        if task is not None and task.physician_id == getattr(author, "id", None):
            messages.success(request, gettext("Conversation saved. Now write its rubric."))
            url = reverse("rubric_editor", args=[outcome.conversation.code])
        else:
            if task is not None:
                saved = gettext("Conversation saved; its rubric was assigned to %(physician)s.")
                messages.success(request, saved % {"physician": task.physician})
            else:
                nobody = gettext(
                    "Conversation saved; its rubric was assigned to nobody yet: there is no active physician."
                )
                messages.success(request, nobody)
            url = reverse("home")
        return HttpResponseClientRedirect(url) if wants_fragment(request) else redirect(url)
    return render_page(request, "annotation/draft.html", {"form": form}, fragment="draft-form")
