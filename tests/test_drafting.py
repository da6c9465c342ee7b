"""Drafting a conversation in the browser, which then enters the rubric workflow."""

import json

import pytest
from django.urls import reverse

from annotation.formats.healthbench import RubricItem, format_row, parse_line
from annotation.models import Assignment, Conversation
from tests.workspace import client_for, htmx, make_world

pytestmark = pytest.mark.django_db

TURNS = [
    ("user", "I take warfarin. Can I take ibuprofen for my knee?"),
    ("assistant", "How long have you been taking warfarin, and why?"),
    ("user", "Two years, for atrial fibrillation."),
]


@pytest.fixture
def world():
    return make_world()


def _post(client, turns=TURNS, theme="context_seeking", action="save", headers=None):
    data = {"theme": theme, "role": [r for r, _ in turns], "content": [c for _, c in turns], "action": action}
    return client.post(reverse("draft"), data, **(headers or {}))


def _drafted():
    return Conversation.objects.exclude(prompt_id__in=["conv-a", "conv-b"])


def test_a_physician_drafts_a_conversation_and_writes_its_rubric(world):
    response = _post(client_for(world.outsider))
    conv = _drafted().get()
    assert response.status_code == 302
    assert response.url == reverse("rubric_editor", args=[conv.code])
    assert conv.messages == [{"content": c, "role": r} for r, c in TURNS]
    assert (conv.theme, conv.example_tags, conv.author, conv.canary) == (
        "context_seeking",
        ["theme:context_seeking"],
        world.outsider,
        None,
    )
    assert set(conv.subsets.values_list("name", flat=True)) == {"all", "red-team"}
    rubric = Assignment.objects.get(conversation=conv)
    assert (rubric.kind, rubric.physician, rubric.status) == ("rubric", world.outsider, "open")


def test_a_drafted_conversation_is_a_valid_healthbench_row(world):
    _post(client_for(world.outsider))
    conv = _drafted().get()
    item = RubricItem("Asks about bleeding.", 5, ("level:example", "axis:context_awareness"))
    line = format_row(
        prompt_id=conv.prompt_id,
        messages=conv.messages,
        example_tags=conv.example_tags,
        rubrics=[item],
        ideal=None,
        canary=None,
    )
    assert parse_line(1, line.encode()).messages == conv.messages


def test_a_curators_draft_goes_to_the_least_loaded_active_physician(world):
    response = _post(client_for(world.curator))
    conv = _drafted().get()
    assert response.status_code == 302
    assert response.url == reverse("home")
    # The outsider has no open tasks; owner and colleague have several; trial physicians are not chosen.
    assert Assignment.objects.get(conversation=conv).physician == world.outsider


@pytest.mark.parametrize(
    ("turns", "theme", "message"),
    [
        (TURNS[:2], "hedging", "must end with a user turn"),
        ([("user", "  ")], "hedging", "Write this turn, or remove it."),
        ([("system", "You are a doctor."), ("user", "Hi")], "hedging", "from the user or the assistant"),
        (TURNS, "", "Choose the theme"),
        (TURNS, "astrology", "Choose the theme"),
        ([("user", "hi")] * 20, "hedging", "at most 19 turns"),
        ([("user", "nul\x00byte")], "hedging", "Null characters are not allowed"),
    ],
)
def test_a_bad_draft_is_refused_with_the_reason_beside_the_turns(world, turns, theme, message):
    response = _post(client_for(world.outsider), turns=turns, theme=theme)
    assert response.status_code == 200
    assert message in response.text
    assert not _drafted().exists()


def test_turns_are_added_and_removed_without_javascript(world):
    client = client_for(world.outsider)
    added = _post(client, action="add")
    assert added.status_code == 200
    assert added.text.count('name="content"') == 4
    assert 'id="id_role_4"' in added.text
    assert '<option value="assistant" selected>' in added.text.split('id="id_role_4"')[1][:200]
    removed = _post(client, action="remove")
    assert removed.text.count('name="content"') == 2
    assert not _drafted().exists()


def test_with_htmx_the_form_comes_back_as_a_fragment_and_saving_redirects(world):
    client = client_for(world.outsider)
    fragment = _post(client, action="add", headers=htmx())
    assert fragment.text.lstrip().startswith('<form method="post" action="/conversations/new/" id="draft-form"')
    saved = _post(client, headers=htmx())
    assert saved.headers["HX-Redirect"] == reverse("rubric_editor", args=[_drafted().get().code])


def test_researchers_and_applicants_cannot_draft(world):
    for who in (world.researcher, world.applicant):
        assert client_for(who).get(reverse("draft")).status_code == 403
        assert _post(client_for(who)).status_code == 403
    assert not _drafted().exists()


def test_the_stored_messages_keep_key_order_for_export(world):
    _post(client_for(world.outsider))
    stored = Conversation.objects.filter(id=_drafted().get().id).values_list("messages", flat=True).get()
    assert list(stored[0]) == ["content", "role"]
    json.dumps(stored)
