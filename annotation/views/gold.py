"""Gold items: curators mark (response, criterion) or (conversation, consensus criterion) items
with a known answer and a rationale; physicians on trial are given some among their tasks."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods

from annotation.access import HtmxRequest, get_gold_item_for_curator, require_curator
from annotation.forms.gold import GoldConversationForm, GoldEditForm, GoldItemForm
from annotation.selectors.gold import gold_item_answers, gold_items_listed
from annotation.services.gold import gold_item_remove

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


ITEM_TEMPLATE = "annotation/gold_item.html"


@login_required
@require_http_methods(["GET", "POST"])
def gold_item_edit(request: HtmxRequest, gold_id: int) -> HttpResponse:
    """Change a gold item's rationale or known answer. A new known answer changes the gold
    accuracy of every physician who answered the item, so once anyone has, the page first says
    how (right before and after) and asks to confirm."""
    gold = get_gold_item_for_curator(request, gold_id)
    tally = gold_item_answers(gold)
    form = GoldEditForm(request.POST if request.method == "POST" else None, instance=gold)
    confirming = False
    if request.method == "POST" and form.is_valid():
        if form.answer_changes and tally.answered and request.POST.get("confirm") != "yes":
            confirming = True
        else:
            form.save()
            messages.success(request, _("Gold item changed: known answer %(answer)s.") % {"answer": gold.answer_text})
            return redirect(reverse("gold_items") + f"#gold-{gold.id}")
    context = {"gold": gold, "form": form, "tally": tally, "confirming": confirming, "mode": "edit"}
    status = 400 if request.method == "POST" and not form.is_valid() else 200
    return render(request, ITEM_TEMPLATE, context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def gold_item_remove_view(request: HtmxRequest, gold_id: int) -> HttpResponse:
    """GET: what removing the item would do; POST: remove it."""
    gold = get_gold_item_for_curator(request, gold_id)
    if request.method == "POST":
        answers = gold_item_remove(gold)
        removed = ngettext(
            "Gold mark removed; %(answers)d first answer left the physicians' gold accuracy.",
            "Gold mark removed; %(answers)d first answers left the physicians' gold accuracy.",
            answers,
        )
        messages.success(request, removed % {"answers": answers})
        return redirect(reverse("gold_items"))
    context = {"gold": gold, "tally": gold_item_answers(gold), "mode": "remove"}
    return render(request, ITEM_TEMPLATE, context)
