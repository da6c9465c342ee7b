from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from annotation.access import WORKING, get_conversation_for_reader, physician_for, require_role, role_of
from annotation.models import THEMES, Conversation, Physician
from annotation.selectors.consensus import cant_judge_answers
from annotation.selectors.tasks import task_summary


@never_cache
def home(request: HttpRequest) -> HttpResponseBase:
    # The root is the login page for visitors, so a fresh install opens on a way in.
    if not request.user.is_authenticated:
        return LoginView.as_view()(request)
    role = role_of(request.user)
    physician = physician_for(request.user)
    worker = physician if role == Physician.Role.PHYSICIAN and physician and physician.status in WORKING else None
    reader = role in (Physician.Role.CURATOR, Physician.Role.RESEARCHER)
    context = {
        "role": role,
        "physician": physician,
        "tasks": task_summary(worker) if worker else [],
        "working": worker is not None,
        "conversation_count": Conversation.objects.count() if reader else 0,
        "themes": Conversation.objects.values("theme").annotate(n=Count("id")).order_by("theme") if reader else [],
    }
    return render(request, "home.html", context)


@login_required
def conversation_list(request: HttpRequest) -> HttpResponse:
    require_role(request, Physician.Role.CURATOR, Physician.Role.RESEARCHER)
    conversations = Conversation.objects.annotate(n_criteria=Count("criteria")).order_by("id")
    theme = request.GET.get("theme", "")
    if theme:
        conversations = conversations.filter(theme=theme)
    page = Paginator(conversations, 50).get_page(request.GET.get("page"))
    return render(request, "conversation_list.html", {"page": page, "themes": THEMES, "theme": theme})


@login_required
def conversation_detail(request: HttpRequest, code) -> HttpResponse:
    conversation = get_conversation_for_reader(request, code)
    criteria = conversation.criteria.select_related("consensus_criterion", "author__user").order_by("position", "id")
    context = {"conversation": conversation, "criteria": criteria, "cant_judge": cant_judge_answers(conversation)}
    return render(request, "conversation_detail.html", context)
