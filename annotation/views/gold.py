"""Gold items: curators mark (response, criterion) or (conversation, consensus criterion) items
with a known answer and a rationale; physicians on trial are given some among their tasks."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotation.access import HtmxRequest, require_curator
from annotation.forms.gold import GoldConversationForm, GoldItemForm
from annotation.selectors.gold import gold_items_listed

TEMPLATE = "annotation/gold.html"


@login_required
@require_http_methods(["GET", "POST"])
def gold_items(request: HtmxRequest) -> HttpResponse:
    """The gold items with their answers so far, and the form to mark one: choose the
    conversation (``?conversation=<prompt id>``), then its item, answer and rationale."""
    curator = require_curator(request)
    source = request.POST if request.method == "POST" else request.GET
    chooser = GoldConversationForm(source if "conversation" in source else None)
    form = None
    status = 200
    if chooser.is_bound and chooser.is_valid():
        conversation = chooser.cleaned_data["conversation"]
        form = GoldItemForm(request.POST if request.method == "POST" else None, conversation=conversation)
        if request.method == "POST":
            if form.is_valid():
                form.instance.created_by = curator
                try:
                    gold = form.save()
                except IntegrityError:
                    form.add_error(None, "Another curator marked this item gold at the same moment.")
                else:
                    messages.success(request, f"Marked gold: {gold}, known answer {gold.answer_text}.")
                    return redirect(reverse("gold_items"))
            status = 400
    elif request.method == "POST":
        status = 400
    context = {"chooser": chooser, "form": form, "items": gold_items_listed()}
    return render(request, TEMPLATE, context, status=status)
