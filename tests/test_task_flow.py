"""A physician's way through tasks: a confirmed submit, the next task, drafts kept on the server,
"can't judge" answers, guidelines, and blinding when tasks are given out."""

import re

import pytest
from django.urls import reverse

from annotation.models import (
    Assignment,
    CantJudge,
    ConsensusVote,
    Criterion,
    Draft,
    GoldItem,
    Guideline,
    GuidelineRead,
    IdealResponse,
    PhysicianLabel,
)
from annotation.services.assignments import assignments_create, assignments_plan
from grading.models import Response
from tests.workspace import CSRF_INPUT, attach, client_for, conversation, htmx, make_world, task

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings):
    settings.CONSENSUS_MIN_AGREE = 2
    return make_world()


def _add(client, conv, text, points):
    return client.post(reverse("criterion_add", args=[conv.code]), {"text": text, "points": points, "axis": "accuracy"})


# --- 1. a confirmed submit ------------------------------------------------------------------------


def test_a_rubric_with_sign_warnings_is_submitted_only_once_confirmed(world):
    owner = client_for(world.owner)
    _add(owner, world.a, "Recommends waiting to see if the pain passes.", 8)
    _add(owner, world.a, "States that it's just heartburn.", 5)
    page = owner.post(reverse("rubric_submit", args=[world.a.code]))
    text = page.content.decode()
    assert page.status_code == 409
    assert "2 criteria still read against their sign: " in text
    assert "#2</a>, <a" in text
    assert "Submit anyway?" in text
    world.rubric_task.refresh_from_db()
    assert world.rubric_task.is_open
    confirmed = owner.post(reverse("rubric_submit", args=[world.a.code]), {"confirm": "sign"})
    world.rubric_task.refresh_from_db()
    assert confirmed.status_code == 302
    assert world.rubric_task.is_done


def test_a_rubric_without_warnings_submits_at_once_and_leads_to_the_next_task(world):
    owner = client_for(world.owner)
    _add(owner, world.a, "Advises calling emergency services now.", 9)
    response = owner.post(reverse("rubric_submit", args=[world.a.code]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("ideal_editor", args=[world.a.code])
    assert "submitted" in response.content.decode()
    assert "Next: write ideal response" in response.content.decode()


# --- 2. the next task, everywhere -----------------------------------------------------------------


def test_save_and_next_on_an_ideal_response_goes_to_the_next_task(world):
    second = conversation("conv-c")
    task(world.owner, Assignment.Kind.IDEAL_RESPONSE, second)
    response = client_for(world.owner).post(
        reverse("ideal_editor", args=[world.a.code]), {"text": "Call an ambulance now.", "action": "next"}
    )
    # Another ideal response first, before tasks of other kinds.
    assert response.status_code == 302
    assert response["Location"] == reverse("ideal_editor", args=[second.code])
    assert IdealResponse.objects.get(author=world.owner).text == "Call an ambulance now."


def test_the_last_vote_offers_the_next_task(world):
    client = client_for(world.owner)
    for entry in world.catalogue:
        response = client.post(
            reverse("vote", args=[world.a.code, entry.code]), {"applies": "yes"}, **htmx()
        ).content.decode()
    assert "done, thank you" in response
    assert "Next task: write" in response
    assert "data-next-task" in response


def test_the_end_of_labeling_leads_to_another_kind_of_task(world):
    client = client_for(world.colleague)
    for item in (world.label_task, world.next_label_task):
        response = client.post(reverse("label_item", args=[item.code]), {"met": "yes"}, **htmx()).content.decode()
    assert "Nothing left to label" in response
    assert "Next task: write rubric" in response


# --- 3. drafts ---------------------------------------------------------------------------------------


def _draft(client, key, text):
    return client.post(reverse("draft_save"), {"key": key, "text": text})


def test_an_ideal_response_draft_comes_back_in_a_new_session_and_goes_once_saved(world):
    key = f"ideal:{world.a.code}"
    assert _draft(client_for(world.owner), key, "Call an ambulance; while you wait…").status_code == 200
    # A new login, another browser: the draft is on the server.
    page = client_for(world.owner).get(reverse("ideal_editor", args=[world.a.code])).content.decode()
    assert "Call an ambulance; while you wait…" in page
    assert "Your draft from" in page
    client_for(world.owner).post(reverse("ideal_editor", args=[world.a.code]), {"text": "Final.", "action": "stay"})
    assert not Draft.objects.filter(key=key).exists()


def test_a_label_comment_survives_skip_and_previous(world):
    client = client_for(world.colleague)
    key = f"label-comment:{world.label_task.code}"
    _draft(client, key, "Half-written comment")
    client.get(reverse("label_item", args=[world.next_label_task.code]), **htmx())
    page = client.get(reverse("label_item", args=[world.label_task.code]), **htmx()).content.decode()
    assert "Half-written comment</textarea>" in page


def test_the_criterion_being_written_is_kept_and_cleared_once_added(world):
    owner = client_for(world.owner)
    key = f"criterion:{world.a.code}:new"
    _draft(owner, key, "Asks whether the pain spreads")
    assert "Asks whether the pain spreads</textarea>" in owner.get(reverse("rubric_editor", args=[world.a.code])).text
    _add(owner, world.a, "Asks whether the pain spreads to the arm.", 4)
    assert not Draft.objects.filter(key=key).exists()


def test_nobody_keeps_drafts_in_someone_elses_task(world):
    assert _draft(client_for(world.outsider), f"ideal:{world.a.code}", "x").status_code == 404
    assert _draft(client_for(world.owner), "anything:else", "x").status_code == 404
    assert _draft(client_for(world.curator), f"ideal:{world.a.code}", "x").status_code == 403
    assert not Draft.objects.exists()


# --- 4. can't judge ----------------------------------------------------------------------------------


def test_cant_judge_on_a_label_is_stored_apart_and_finishes_the_item(world):
    client = client_for(world.colleague)
    url = reverse("label_item", args=[world.label_task.code])
    client.post(url, {"met": "yes"})
    refused = client.post(url, {"met": "cant"}, **htmx()).content.decode()
    assert "choose a reason" in refused
    client.post(url, {"met": "cant", "reason": "cut_off", "note": "Stops mid-sentence"})
    answer = CantJudge.objects.get()
    assert (answer.reason, answer.note, answer.criterion_id) == ("cut_off", "Stops mid-sentence", world.cluster.id)
    # It replaces the earlier label: nothing of it reaches the agreement figures.
    assert not PhysicianLabel.objects.exists()
    world.label_task.refresh_from_db()
    assert world.label_task.is_done
    curator_page = client_for(world.curator).get(reverse("conversation_detail", args=[world.a.code])).text
    assert "The response is cut off or empty" in curator_page
    assert "Stops mid-sentence" in curator_page


def test_cant_judge_on_a_vote_stays_out_of_the_consensus_count(world):
    entry = world.catalogue[1]
    for who in (world.owner, world.colleague):
        client_for(who).post(reverse("vote", args=[world.a.code, entry.code]), {"applies": "yes"})
    assert Criterion.objects.filter(conversation=world.a, consensus_criterion=entry).exists()
    client_for(world.owner).post(
        reverse("vote", args=[world.a.code, entry.code]), {"applies": "cant", "reason": "unclear"}
    )
    assert not ConsensusVote.objects.filter(physician=world.owner, consensus_criterion=entry).exists()
    # One "applies" is left: below the two needed, so the criterion the votes attached is taken off.
    assert not Criterion.objects.filter(conversation=world.a, consensus_criterion=entry).exists()
    tally = client_for(world.curator).get(reverse("consensus_tally", args=[world.a.code])).text
    assert "dr_owner: the criterion is unclear" in tally


def test_a_ballot_is_done_when_every_entry_has_a_vote_or_a_cant_judge(world):
    client = client_for(world.owner)
    for entry in world.catalogue[:-1]:
        client.post(reverse("vote", args=[world.a.code, entry.code]), {"applies": "no"})
    client.post(reverse("vote", args=[world.a.code, world.catalogue[-1].code]), {"applies": "cant", "reason": "other"})
    world.vote_task.refresh_from_db()
    assert world.vote_task.is_done


# --- 5. guidelines -----------------------------------------------------------------------------------


def test_guidelines_open_the_first_time_and_are_linked_after(world):
    curator = client_for(world.curator)
    curator.post(reverse("guideline_edit", args=["consensus_vote"]), {"text": "Vote **from the conversation** alone."})
    assert Guideline.objects.get(kind="consensus_vote").text.startswith("Vote")
    owner = client_for(world.owner)
    url = reverse("votes", args=[world.a.code])
    first = owner.get(url).content.decode()
    assert "Before you start" in first
    assert "<strong>from the conversation</strong>" in first
    owner.post(reverse("guideline_read", args=["consensus_vote"]), {"next": url})
    assert GuidelineRead.objects.filter(physician=world.owner, kind="consensus_vote").exists()
    again = owner.get(url).content.decode()
    assert "Before you start" not in again
    assert "Guidelines for this task" in again
    assert "from the conversation" in owner.get(reverse("guidelines")).content.decode()


def test_only_curators_write_guidelines(world):
    assert client_for(world.owner).post(reverse("guideline_edit", args=["label"]), {"text": "x"}).status_code == 403
    assert client_for(world.curator).get(reverse("guideline_edit", args=["nothing"])).status_code == 404


# --- 13. blinding through assignments ---------------------------------------------------------------


def test_nobody_labels_a_conversation_on_which_they_still_vote(world):
    vote = task(world.outsider, Assignment.Kind.CONSENSUS_VOTE, world.a)
    plan = assignments_plan(
        kind=Assignment.Kind.LABEL, conversation_ids=[world.a.id], physicians=[world.outsider], per_item=2
    )
    # The outsider's vote task on conversation a is open: no labeling for them there, and the preview says why.
    assert plan.tasks == 0
    assert plan.short == 2
    assert "skipped dr_outsider, who still votes on its consensus criteria" in plan.reasons[0]
    vote.status, vote.completed = Assignment.Status.DONE, vote.created
    vote.save()
    plan = assignments_plan(
        kind=Assignment.Kind.LABEL, conversation_ids=[world.a.id], physicians=[world.outsider], per_item=2
    )
    assert plan.tasks == 2
    assert plan.per_physician == [("dr_outsider", 2)]


def test_the_preview_names_conversations_that_give_nothing_to_label(world):
    plan = assignments_plan(
        kind=Assignment.Kind.LABEL, conversation_ids=[world.b.id], physicians=[world.outsider], per_item=1
    )
    assert plan.tasks == 0
    assert plan.empty == ["conv-b: it has no model responses to label"]
    page = client_for(world.curator).get(
        reverse("assignments"), {"kind": "label", "per_item": "1", "limit": "50", "theme": "hedging"}
    )
    text = page.content.decode()
    assert "conv-b: it has no model responses to label" in text
    assert "Assign 0 tasks" in text


def test_assigning_keeps_the_form_and_counts_in_the_right_number(world):
    fresh = conversation("conv-d")
    attach(fresh, world.catalogue[0])
    curator = client_for(world.curator)
    response = curator.post(
        reverse("assignments"),
        {"kind": "rubric", "per_item": "1", "limit": "1", "status": "unassigned", "physician_status": "active"},
    )
    assert response.status_code == 302
    assert "kind=rubric" in response["Location"]
    assert "per_item=1" in response["Location"]
    page = curator.get(response["Location"])
    assert "1 task created over 1 item" in page.content.decode()
    assert Assignment.objects.filter(conversation=fresh, kind="rubric").count() == 1


def test_voting_is_not_given_to_a_physician_who_labels_its_responses(world):
    task(world.outsider, Assignment.Kind.LABEL, world.a, response=world.responses[0], criterion=world.cluster)
    summary = assignments_create(
        kind=Assignment.Kind.CONSENSUS_VOTE,
        conversation_ids=[world.a.id],
        physicians=[world.outsider],
        per_item=3,
        assigned_by=None,
    )
    assert summary.created == 0
    assert "skipped dr_outsider, who labels its responses and so has seen the consensus criteria" in summary.reasons[0]


def _gold_world(world):
    """Gold items on two conversations of the theme (one to label, one to vote on), given to the
    physician on trial among ordinary tasks."""
    to_label, to_vote = conversation("conv-x"), conversation("conv-y")
    cluster = attach(to_label, world.catalogue[0])
    response = Response.objects.create(conversation=to_label, text="Call an ambulance at once.", model_name="m")
    label = GoldItem.objects.create(
        conversation=to_label, response=response, criterion=cluster, answer=True, rationale="SECRET-GOLD-WHY-LABEL"
    )
    vote = GoldItem.objects.create(
        conversation=to_vote, consensus_criterion=world.catalogue[1], answer=False, rationale="SECRET-GOLD-WHY-VOTE"
    )
    # Labeling on a, voting on b: nobody votes where they label.
    for kind, ordinary in ((Assignment.Kind.LABEL, world.a), (Assignment.Kind.CONSENSUS_VOTE, world.b)):
        summary = assignments_create(
            kind=kind, conversation_ids=[ordinary.id], physicians=[world.trial], per_item=3, assigned_by=None
        )
        assert summary.gold == 1
    return label, vote


def _without_tokens(html: str) -> str:
    """The page without its CSRF tokens, which are masked afresh on every response."""
    html = CSRF_INPUT.sub('name="csrfmiddlewaretoken" value=""', html)
    return re.sub(r'"X-CSRFToken": "[^"]+"', '"X-CSRFToken": ""', html)


def _trial_pages(world) -> list[str]:
    tasks = Assignment.objects.filter(physician=world.trial).order_by("id")
    urls = [reverse("home"), reverse("guidelines"), reverse("physician_quality", args=[world.trial.code])]
    urls += [f"/api/physicians/{world.trial.code}/", "/api/conversations/", "/api/criteria/"]
    for t in tasks:
        urls.append(
            reverse("label_item", args=[t.code]) if t.kind == "label" else reverse("votes", args=[t.conversation.code])
        )
    return urls


def test_gold_answers_never_show_before_the_physician_answers(world, settings):
    settings.GOLD_SHARE_FOR_TRIAL = 0.5
    label, vote = _gold_world(world)
    trial = client_for(world.trial)
    pages = _trial_pages(world)
    assert len(pages) == 6 + 5  # two ordinary labeling items and a gold one; a ballot and a gold ballot
    for url in pages:
        for headers in ({}, htmx()):
            text = trial.get(url, follow=True, **headers).content.decode()
            assert "SECRET-GOLD" not in text, url
            if str(world.trial.code) not in url:
                # Task pages do not even say that gold items exist (their own quality page
                # and API say "no gold item answered yet", of no item in particular).
                found = re.search(r".{80}(gold|known answer).{80}", text, re.IGNORECASE | re.DOTALL)
                assert not found, (url, found and found.group(0))
    assert "SECRET-GOLD" not in trial.get(reverse("label_next"), follow=True).content.decode()
    assert trial.get(f"/api/physicians/{world.trial.code}/").json()["gold"] is None
    # The gold item's page is the page it would be if it were not gold, byte for byte.
    gold_label = Assignment.objects.get(physician=world.trial, response=label.response)
    gold_ballot = Assignment.objects.get(physician=world.trial, conversation=vote.conversation)
    urls = [reverse("label_item", args=[gold_label.code]), reverse("votes", args=[vote.conversation.code])]
    before = [_without_tokens(trial.get(url).content.decode()) for url in urls]
    GoldItem.objects.all().delete()
    assert [_without_tokens(trial.get(url).content.decode()) for url in urls] == before
    assert gold_ballot.is_open


def test_the_known_answer_shows_once_the_physician_has_answered(world, settings):
    settings.GOLD_SHARE_FOR_TRIAL = 0.5
    label, vote = _gold_world(world)
    trial = client_for(world.trial)
    gold_label = Assignment.objects.get(physician=world.trial, response=label.response)
    # "Can't judge" is no answer: still nothing shown.
    unsure = trial.post(reverse("label_item", args=[gold_label.code]), {"met": "cant", "reason": "unclear"})
    assert "SECRET-GOLD" not in trial.get(unsure["Location"]).content.decode()
    assert "SECRET-GOLD" not in trial.get(reverse("label_item", args=[gold_label.code])).content.decode()
    trial.post(reverse("label_item", args=[gold_label.code]), {"met": "yes"})
    assert "SECRET-GOLD-WHY-LABEL" in trial.get(reverse("label_item", args=[gold_label.code])).content.decode()
    url = reverse("vote", args=[vote.conversation.code, vote.consensus_criterion.code])
    voted = trial.post(url, {"applies": "yes"}, **htmx()).content.decode()
    assert "SECRET-GOLD-WHY-VOTE" in voted
    assert "Your vote differs from the known answer" in voted
    assert "SECRET-GOLD-WHY-LABEL" not in voted
