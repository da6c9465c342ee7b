"""Who may open which page and do what: every role against every page and action, plus CSRF.

Lookups that miss someone's own work answer 404 (ids cannot be probed); a role that may
never use a page gets 403; visitors are sent to the login page.
"""

import re
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from annotation.models import Assignment, ConsensusVote, Criterion, GoldItem, PhysicianLabel
from tests.workspace import PASSWORD, client_for, csrf_token_from, htmx, make_world

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "owner", "colleague", "outsider", "trial", "applicant", "removed", "curator", "researcher"]
WORKING = {"owner", "colleague", "outsider", "trial"}


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    url: object  # world -> str
    data: object = None  # world -> dict
    # Which roles succeed, and with what status; everyone else gets `others` (by role group).
    allowed: tuple[str, ...] = ()
    ok: int | None = 200
    # Status for working physicians who are not allowed: 404 on task pages, 403 elsewhere.
    physicians: int = 403


def _own(w):
    return Criterion.objects.create(
        conversation=w.a, text="Owner's criterion.", points=4, author=w.owner, origin="editor"
    )


CRITERION = {"text": "Advises calling emergency services.", "points": "7", "axis": "completeness"}

ENDPOINTS = [
    Endpoint("rubric", "get", lambda w: reverse("rubric_editor", args=[w.a.code]), allowed=("owner",), physicians=404),
    Endpoint(
        "criterion add",
        "post",
        lambda w: reverse("criterion_add", args=[w.a.code]),
        lambda w: CRITERION,
        ("owner",),
        302,
        404,
    ),
    Endpoint(
        "criterion edit form",
        "get",
        lambda w: reverse("criterion_edit", args=[w.a.code, _own(w).id]),
        allowed=("owner",),
        physicians=404,
    ),
    Endpoint(
        "criterion edit",
        "post",
        lambda w: reverse("criterion_edit", args=[w.a.code, _own(w).id]),
        lambda w: CRITERION,
        ("owner",),
        302,
        404,
    ),
    Endpoint(
        "criterion row",
        "get",
        lambda w: reverse("criterion_row", args=[w.a.code, _own(w).id]),
        allowed=("owner",),
        ok=302,
        physicians=404,
    ),
    Endpoint(
        "criterion delete",
        "post",
        lambda w: reverse("criterion_delete", args=[w.a.code, _own(w).id]),
        lambda w: {},
        ("owner",),
        302,
        404,
    ),
    Endpoint(
        "rubric submit", "post", lambda w: reverse("rubric_submit", args=[w.a.code]), lambda w: {}, ("owner",), 302, 404
    ),
    Endpoint("ideal", "get", lambda w: reverse("ideal_editor", args=[w.a.code]), allowed=("owner",), physicians=404),
    Endpoint(
        "ideal save",
        "post",
        lambda w: reverse("ideal_editor", args=[w.a.code]),
        lambda w: {"text": "Go now."},
        ("owner",),
        302,
        404,
    ),
    Endpoint(
        "votes", "get", lambda w: reverse("votes", args=[w.a.code]), allowed=("owner", "colleague"), physicians=404
    ),
    Endpoint(
        "vote",
        "post",
        lambda w: reverse("vote", args=[w.a.code, w.catalogue[1].code]),
        lambda w: {"applies": "yes"},
        ("owner", "colleague"),
        302,
        404,
    ),
    Endpoint(
        "label",
        "get",
        lambda w: reverse("label_item", args=[w.label_task.code]),
        allowed=("colleague",),
        physicians=404,
    ),
    Endpoint(
        "label save",
        "post",
        lambda w: reverse("label_item", args=[w.label_task.code]),
        lambda w: {"met": "yes"},
        ("colleague",),
        302,
        404,
    ),
    Endpoint("label next", "get", lambda w: reverse("label_next"), allowed=tuple(WORKING), ok=None),
    Endpoint("draft", "get", lambda w: reverse("draft"), allowed=(*WORKING, "curator")),
    Endpoint(
        "draft save",
        "post",
        lambda w: reverse("draft"),
        lambda w: {"theme": "hedging", "role": ["user"], "content": ["Is this mole cancer?"]},
        (*WORKING, "curator"),
        302,
    ),
    Endpoint("assignments", "get", lambda w: reverse("assignments"), allowed=("curator", "researcher")),
    Endpoint(
        "assign",
        "post",
        lambda w: reverse("assignments"),
        lambda w: {"kind": "rubric", "limit": "5", "per_item": "1", "condition": "no_reference"},
        ("curator",),
        302,
    ),
    Endpoint("physicians", "get", lambda w: reverse("physicians"), allowed=("curator", "researcher")),
    Endpoint(
        "physician status",
        "post",
        lambda w: reverse("physician_status", args=[w.applicant.code]),
        lambda w: {"status": "trial"},
        ("curator",),
        302,
    ),
    Endpoint("gold items", "get", lambda w: reverse("gold_items"), allowed=("curator",)),
    Endpoint(
        "gold item mark",
        "post",
        lambda w: reverse("gold_items"),
        lambda w: {
            "conversation": w.a.prompt_id,
            "kind": "vote",
            "consensus_criterion": w.catalogue[1].id,
            "known": "yes",
            "rationale": "It is an emergency.",
        },
        ("curator",),
        302,
    ),
    Endpoint("gold item edit", "get", lambda w: reverse("gold_item_edit", args=[_gold(w)]), allowed=("curator",)),
    Endpoint(
        "gold item change",
        "post",
        lambda w: reverse("gold_item_edit", args=[_gold(w)]),
        lambda w: {"known": "no", "rationale": "Not an emergency after all."},
        ("curator",),
        302,
    ),
    Endpoint("gold item remove", "get", lambda w: reverse("gold_item_remove", args=[_gold(w)]), allowed=("curator",)),
    Endpoint(
        "gold item removed",
        "post",
        lambda w: reverse("gold_item_remove", args=[_gold(w)]),
        lambda w: {},
        ("curator",),
        302,
    ),
    Endpoint("tally", "get", lambda w: reverse("consensus_tally", args=[w.a.code]), allowed=("curator", "researcher")),
    Endpoint("conversations", "get", lambda w: reverse("conversation_list"), allowed=("curator", "researcher")),
    Endpoint(
        "conversation",
        "get",
        lambda w: reverse("conversation_detail", args=[w.a.code]),
        allowed=("curator", "researcher"),
    ),
]


def _expected(endpoint: Endpoint, role: str) -> int | None:
    if role == "anonymous":
        return 302
    if role in endpoint.allowed:
        return endpoint.ok
    if role in WORKING:
        return endpoint.physicians
    return 403


def _gold(w) -> int:
    """A gold voting item of conversation a (made on first use)."""
    gold, _ = GoldItem.objects.get_or_create(
        conversation=w.a, consensus_criterion=w.catalogue[1], defaults={"answer": True, "rationale": "An emergency."}
    )
    return gold.id


@pytest.fixture
def world():
    return make_world()


def _client(world, role: str, *, csrf: bool = False):
    return client_for(None if role == "anonymous" else getattr(world, role), csrf=csrf)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_permission_matrix(world, endpoint, role):
    client = _client(world, role)
    url = endpoint.url(world)
    response = client.get(url) if endpoint.method == "get" else client.post(url, endpoint.data(world))
    expected = _expected(endpoint, role)
    if expected is None:  # a redirect to the next item, or the all-done page
        assert response.status_code in (200, 302)
    else:
        assert response.status_code == expected, f"{role} {endpoint.method} {endpoint.name}"
    if role == "anonymous":
        assert response.url.startswith(reverse("login"))


def test_forbidden_posts_change_nothing(world):
    for role in ROLES:
        if role in ("owner", "colleague", "curator"):
            continue
        client = _client(world, role)
        client.post(reverse("criterion_add", args=[world.a.code]), CRITERION)
        client.post(reverse("vote", args=[world.a.code, world.catalogue[1].code]), {"applies": "yes"})
        client.post(reverse("label_item", args=[world.label_task.code]), {"met": "yes"})
        client.post(reverse("physician_status", args=[world.owner.code]), {"status": "removed"})
    assert not Criterion.objects.filter(author__isnull=False).exists()
    assert not ConsensusVote.objects.exists()
    assert not PhysicianLabel.objects.exists()
    world.owner.refresh_from_db()
    assert world.owner.status == "active"


def test_a_criterion_id_under_another_conversations_code_is_not_found(world):
    mine = _own(world)
    world.colleague_rubric_task.physician = world.owner
    world.colleague_rubric_task.save()
    client = client_for(world.owner)
    assert client.get(reverse("criterion_edit", args=[world.b.code, mine.id])).status_code == 404
    assert client.post(reverse("criterion_delete", args=[world.b.code, mine.id])).status_code == 404
    assert Criterion.objects.filter(id=mine.id).exists()


def test_an_unknown_code_is_not_found(world):
    client = client_for(world.owner)
    assert client.get("/conversations/00000000-0000-4000-8000-000000000000/rubric/").status_code == 404
    assert client.get("/labels/00000000-0000-4000-8000-000000000000/").status_code == 404


def test_a_cancelled_task_no_longer_opens(world):
    Assignment.objects.filter(id=world.rubric_task.id).update(status=Assignment.Status.CANCELLED)
    assert client_for(world.owner).get(reverse("rubric_editor", args=[world.a.code])).status_code == 404


def test_get_only_pages_refuse_posts(world):
    client = client_for(world.owner)
    assert client.post(reverse("rubric_editor", args=[world.a.code])).status_code == 405
    assert client.post(reverse("votes", args=[world.a.code])).status_code == 405
    assert client_for(world.curator).post(reverse("physicians")).status_code == 405


# CSRF: every form refuses a POST without the token, and accepts one with it.


@dataclass(frozen=True)
class Form:
    """A form: who fills it in, the page it is on, where it posts and what."""

    role: str
    page: object  # world -> url
    action: object  # world -> url
    data: object = lambda w: {}


def _rubric(w):
    return reverse("rubric_editor", args=[w.a.code])


def _label(w):
    return reverse("label_item", args=[w.label_task.code])


CSRF_FORMS = {
    "criterion add": Form("owner", _rubric, lambda w: reverse("criterion_add", args=[w.a.code]), lambda w: CRITERION),
    "criterion edit": Form(
        "owner", _rubric, lambda w: reverse("criterion_edit", args=[w.a.code, _own(w).id]), lambda w: CRITERION
    ),
    "criterion delete": Form("owner", _rubric, lambda w: reverse("criterion_delete", args=[w.a.code, _own(w).id])),
    "rubric submit": Form("owner", _rubric, lambda w: reverse("rubric_submit", args=[w.a.code])),
    "ideal": Form(
        "owner",
        lambda w: reverse("ideal_editor", args=[w.a.code]),
        lambda w: reverse("ideal_editor", args=[w.a.code]),
        lambda w: {"text": "x"},
    ),
    "vote": Form(
        "owner",
        lambda w: reverse("votes", args=[w.a.code]),
        lambda w: reverse("vote", args=[w.a.code, w.catalogue[1].code]),
        lambda w: {"applies": "no"},
    ),
    "label": Form("colleague", _label, _label, lambda w: {"met": "no"}),
    "draft": Form(
        "outsider",
        lambda w: reverse("draft"),
        lambda w: reverse("draft"),
        lambda w: {"theme": "hedging", "role": ["user"], "content": ["Hi"]},
    ),
    "assign": Form(
        "curator",
        lambda w: reverse("assignments") + "?kind=rubric&limit=1&per_item=1",
        lambda w: reverse("assignments"),
        lambda w: {"kind": "rubric", "limit": "1", "per_item": "1"},
    ),
    "physician status": Form(
        "curator",
        lambda w: reverse("physicians"),
        lambda w: reverse("physician_status", args=[w.applicant.code]),
        lambda w: {"status": "trial"},
    ),
    "logout": Form("owner", lambda w: "/", lambda w: reverse("logout")),
}


@pytest.mark.parametrize("form", CSRF_FORMS.values(), ids=CSRF_FORMS.keys())
def test_every_form_needs_the_csrf_token(world, form):
    client = _client(world, form.role, csrf=True)
    url = form.action(world)
    assert client.post(url, form.data(world)).status_code == 403
    token = csrf_token_from(client.get(form.page(world)).text)
    response = client.post(url, {**form.data(world), "csrfmiddlewaretoken": token})
    assert response.status_code in (200, 302)


def test_htmx_requests_carry_the_token_from_the_body_header(world):
    client = _client(world, "owner", csrf=True)
    html = client.get(reverse("votes", args=[world.a.code])).text
    token = re.search(r"hx-headers='\{\"X-CSRFToken\": \"([^\"]+)\"\}'", html).group(1)
    url = reverse("vote", args=[world.a.code, world.catalogue[1].code])
    assert client.post(url, {"applies": "yes"}, **htmx()).status_code == 403
    assert client.post(url, {"applies": "yes"}, **htmx(HTTP_X_CSRFTOKEN=token)).status_code == 200


# Accounts: login, logout, password change.


def test_login_and_logout(world):
    client = client_for(None, csrf=True)
    page = client.get(reverse("login"))
    bad = client.post(
        reverse("login"),
        {"username": "dr_owner", "password": "wrong", "csrfmiddlewaretoken": csrf_token_from(page.text)},
    )
    assert bad.status_code == 200
    assert "enter a correct username and password" in bad.text
    good = client.post(
        reverse("login"),
        {"username": "dr_owner", "password": PASSWORD, "csrfmiddlewaretoken": csrf_token_from(page.text)},
    )
    assert good.status_code == 302
    home = client.get("/")
    assert "Welcome, dr_owner" in home.text
    assert client.post(reverse("logout"), {"csrfmiddlewaretoken": csrf_token_from(home.text)}).status_code == 302
    assert client.get(reverse("rubric_editor", args=[world.a.code])).status_code == 302


def test_password_change(world):
    client = client_for(world.owner)
    assert client.get(reverse("password_change")).status_code == 200
    response = client.post(
        reverse("password_change"),
        {"old_password": PASSWORD, "new_password1": "a-much-longer-pass-77", "new_password2": "a-much-longer-pass-77"},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("password_change_done")
    assert User.objects.get(username="dr_owner").check_password("a-much-longer-pass-77")


def test_password_change_needs_a_login(world):
    assert client_for(None).get(reverse("password_change")).status_code == 302
