"""Gold items: curators mark items with a known answer; physicians on trial get a share of them
among their tasks, see the answer only after theirs, and their gold accuracy is counted."""

import re
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotation.models import Assignment, Criterion, GoldAnswer, GoldItem, Physician
from annotation.selectors.gold import GoldTally
from annotation.services.assignments import assignments_create
from annotation.services.gold import gold_count
from grading.models import Response
from grading.physicians.quality import rate_interval
from tests.workspace import attach, client_for, conversation, htmx, make_world

pytestmark = pytest.mark.django_db

RATIONALE = "The response sends the user to emergency care at once: GOLD-RATIONALE-7f3."


@pytest.fixture
def world(settings):
    settings.GOLD_SHARE_FOR_TRIAL = 0.5
    settings.GOLD_MIN_ITEMS = 2
    settings.GOLD_PROMOTION_ACCURACY = 0.75
    w: Any = make_world()
    # A second conversation of the same theme holds the gold items: three responses on its
    # attached consensus criterion, and a voting item on its ballot.
    w.c = conversation("conv-gold")
    w.c_cluster = attach(w.c, w.catalogue[0])
    w.c_responses = [
        Response.objects.create(conversation=w.c, text=f"Gold response {n}.", model_name="m", sample_index=n)
        for n in range(3)
    ]
    return w


def _gold_labels(w, answers=(True, False, True)) -> list[GoldItem]:
    return [
        GoldItem.objects.create(
            conversation=w.c, response=r, criterion=w.c_cluster, answer=a, rationale=f"{RATIONALE} ({n})"
        )
        for n, (r, a) in enumerate(zip(w.c_responses, answers, strict=True))
    ]


def _assign_labels(w):
    return assignments_create(
        kind=Assignment.Kind.LABEL, conversation_ids=[w.a.id], physicians=[w.trial], per_item=2, assigned_by=None
    )


def _mark(client, **fields):
    data = {"conversation": "conv-gold", "known": "yes", "rationale": RATIONALE, **fields}
    return client.post(reverse("gold_items"), data)


# --- marking ---------------------------------------------------------------------------------------


def test_a_curator_marks_a_labeling_item_and_a_voting_item_gold(world):
    curator = client_for(world.curator)
    page = curator.get(reverse("gold_items"), {"conversation": "conv-gold"})
    assert page.status_code == 200
    assert 'name="response"' in page.text
    label = _mark(curator, kind="label", response=world.c_responses[0].id, criterion=world.c_cluster.id)
    assert label.status_code == 302
    vote = _mark(curator, kind="vote", consensus_criterion=world.catalogue[1].id, known="no")
    assert vote.status_code == 302
    label_item, vote_item = GoldItem.objects.order_by("id")
    assert label_item.response == world.c_responses[0]
    assert label_item.criterion == world.c_cluster
    assert label_item.answer is True
    assert vote_item.consensus_criterion == world.catalogue[1]
    assert vote_item.answer is False
    assert vote_item.response is None
    assert label_item.created_by == world.curator
    listed = curator.get(reverse("gold_items")).text
    assert "does not apply" in listed
    assert RATIONALE in listed


def test_marking_refuses_what_no_physician_could_be_asked(world):
    curator = client_for(world.curator)
    unknown = curator.post(reverse("gold_items"), {"conversation": "no-such", "kind": "label"})
    assert unknown.status_code == 400
    assert "No conversation has the prompt id" in unknown.text
    missing = _mark(curator, kind="label", criterion=world.c_cluster.id)
    assert missing.status_code == 400
    assert "A labeling item needs a response and a criterion." in missing.text
    # The conversation's own example-level criterion, or a response of another conversation.
    example = Criterion.objects.create(conversation=world.c, text="Example criterion.", points=3)
    wrong = _mark(curator, kind="label", response=world.responses[0].id, criterion=example.id)
    assert wrong.status_code == 400
    assert wrong.text.count("Select a valid choice") == 2
    other_theme = _mark(curator, kind="vote", consensus_criterion=world.other_theme.id)
    assert "Select a valid choice" in other_theme.text
    blank = _mark(curator, kind="vote", consensus_criterion=world.catalogue[1].id, rationale="   ")
    assert blank.status_code == 400
    assert "This field is required." in blank.text
    long = _mark(curator, kind="vote", consensus_criterion=world.catalogue[1].id, rationale="x" * 1001)
    assert "at most 1000 characters" in long.text
    assert not GoldItem.objects.exists()
    assert _mark(curator, kind="vote", consensus_criterion=world.catalogue[1].id).status_code == 302
    again = _mark(curator, kind="vote", consensus_criterion=world.catalogue[1].id)
    assert "This voting item is already gold." in again.text
    item = {"kind": "label", "response": world.c_responses[0].id, "criterion": world.c_cluster.id}
    assert _mark(curator, **item).status_code == 302
    twice = _mark(curator, **item)
    assert "This labeling item is already gold." in twice.text
    assert GoldItem.objects.count() == 2


def test_the_model_refuses_alike_for_the_admin(world):
    # The admin validates with the model's clean(): a response of another conversation.
    gold = GoldItem(conversation=world.c, response=world.responses[0], criterion=world.c_cluster, answer=True)
    with pytest.raises(ValidationError) as refused:
        gold.full_clean()
    assert "This response answers another conversation." in refused.value.message_dict["response"]
    assert "rationale" in refused.value.message_dict


def test_only_curators_mark_gold(world):
    for who in (world.trial, world.owner, world.researcher):
        assert client_for(who).get(reverse("gold_items")).status_code == 403
        assert _mark(client_for(who), kind="vote", consensus_criterion=world.catalogue[1].id).status_code == 403
    assert not GoldItem.objects.exists()


# --- mixing into the queue -------------------------------------------------------------------------


def test_gold_count_is_the_share_of_the_whole():
    assert [gold_count(n, 0.2) for n in (0, 1, 2, 4, 8, 40)] == [0, 0, 1, 1, 2, 10]
    assert gold_count(3, 0.5) == 3
    assert gold_count(10, 0.0) == 0


def test_a_physician_on_trial_gets_the_share_of_gold_among_their_tasks(world):
    gold = _gold_labels(world)
    summary = _assign_labels(world)
    tasks = list(Assignment.objects.filter(physician=world.trial, kind="label").order_by("id"))
    given = {(t.response_id, t.criterion_id) for t in tasks}
    # Two ordinary items on conversation a (each already has the colleague), and as many gold
    # ones: a share of 0.5.
    assert len(tasks) == 4
    assert given >= {(g.response_id, g.criterion_id) for g in gold[:2]}
    assert summary.gold == 2
    assert "(and 2 gold items for physicians on trial among them)" in str(summary)
    # Gold tasks come after at least one ordinary task, never all at the front of the queue.
    assert tasks[0].conversation_id == world.a.id
    again = _assign_labels(world)
    assert again.created == 0


def test_a_physician_on_trial_gets_gold_voting_items_too(world):
    GoldItem.objects.create(conversation=world.c, consensus_criterion=world.catalogue[2], answer=False, rationale="No.")
    summary = assignments_create(
        kind=Assignment.Kind.CONSENSUS_VOTE,
        conversation_ids=[world.a.id],
        physicians=[world.trial],
        per_item=3,
        assigned_by=None,
    )
    assert summary.gold == 1
    conversations = set(
        Assignment.objects.filter(physician=world.trial, kind="consensus_vote").values_list("conversation", flat=True)
    )
    assert conversations == {world.a.id, world.c.id}


def test_active_physicians_get_no_gold(world):
    _gold_labels(world)
    summary = assignments_create(
        kind=Assignment.Kind.LABEL,
        conversation_ids=[world.a.id],
        physicians=[world.outsider, world.trial],
        per_item=3,
        assigned_by=None,
    )
    outsider = Assignment.objects.filter(physician=world.outsider)
    assert set(outsider.values_list("conversation_id", flat=True)) == {world.a.id}
    assert outsider.count() == 2
    assert summary.gold == 2
    assert Assignment.objects.filter(physician=world.trial, conversation=world.c).count() == 2


def test_no_gold_when_the_share_is_zero(world, settings):
    settings.GOLD_SHARE_FOR_TRIAL = 0.0
    _gold_labels(world)
    summary = _assign_labels(world)
    assert (summary.created, summary.gold) == (2, 0)


# --- answering and accuracy ------------------------------------------------------------------------


def _gold_tasks(world):
    _gold_labels(world)
    _assign_labels(world)
    return list(Assignment.objects.filter(physician=world.trial, conversation=world.c).order_by("response_id"))


def test_after_answering_a_gold_item_the_physician_reads_its_answer_and_rationale(world):
    first, _ = _gold_tasks(world)
    trial = client_for(world.trial)
    url = reverse("label_item", args=[first.code])
    answered = trial.post(url, {"met": "no"}, **htmx())
    # The post-submit step: the same item, with the known answer and why, before moving on.
    assert answered.headers["HX-Push-Url"] == url
    assert "Your answer differs from the known answer" in answered.text
    assert "GOLD-RATIONALE-7f3. (0)" in answered.text
    assert "<strong>met</strong>" in answered.text
    assert "Go to your next item" in answered.text
    without_js = trial.post(url, {"met": "no"})
    assert without_js["Location"] == url


def test_gold_accuracy_counts_first_answers_with_an_interval(world):
    first, second = _gold_tasks(world)
    trial = client_for(world.trial)
    trial.post(reverse("label_item", args=[first.code]), {"met": "yes"})  # right: known met
    trial.post(reverse("label_item", args=[second.code]), {"met": "yes"})  # wrong: known not met
    # Changed after the known answer was shown: accuracy keeps the first answer.
    trial.post(reverse("label_item", args=[second.code]), {"met": "no"})
    assert list(GoldAnswer.objects.order_by("gold_id").values_list("answer", flat=True)) == [True, True]
    page = client_for(world.curator).get(reverse("physician_quality", args=[world.trial.code])).text
    wilson = rate_interval(1, 2)
    assert "Right on 1 of 2 gold items answered" in page
    assert f"{wilson['value']:.3f}" in page
    assert f"{wilson['low']:.3f}" in page
    assert f"{wilson['high']:.3f}" in page
    # The physician reads their own figure too.
    own = trial.get(reverse("physician_quality", args=[world.trial.code])).text
    assert "Right on 1 of 2 gold items answered" in own
    api = trial.get(f"/api/physicians/{world.trial.code}/").json()["gold"]
    assert api == {"answered": 2, "correct": 1, "accuracy": wilson}
    listed = client_for(world.curator).get("/api/physicians/").json()
    by_code = {row["code"]: row["gold"] for row in listed}
    assert by_code[str(world.trial.code)]["correct"] == 1
    assert by_code[str(world.owner.code)] is None


def test_make_active_suggests_promotion_once_the_threshold_is_met(world):
    first, second = _gold_tasks(world)
    trial = client_for(world.trial)
    curator = client_for(world.curator)
    trial.post(reverse("label_item", args=[first.code]), {"met": "yes"})
    page = curator.get(reverse("physicians")).text
    assert "Gold: 1 of 1 right" in page
    assert "Suggested for promotion" not in page  # one answer: under GOLD_MIN_ITEMS = 2
    assert "Promotion is suggested at 75% right over at least 2 gold items." in page
    trial.post(reverse("label_item", args=[second.code]), {"met": "no"})
    page = curator.get(reverse("physicians")).text
    assert "Gold: 2 of 2 right" in page
    assert "Suggested for promotion" in page
    world.trial.refresh_from_db()
    assert world.trial.status == Physician.Status.TRIAL  # suggested, never promoted by itself


@pytest.mark.parametrize(
    ("answered", "correct", "suggested"), [(2, 2, True), (4, 3, True), (4, 2, False), (1, 1, False), (0, 0, False)]
)
def test_the_suggestion_needs_the_accuracy_over_the_minimum_count(world, answered, correct, suggested):
    assert GoldTally(answered, correct).suggests_promotion is suggested


def test_the_admin_refuses_the_same_bad_items(world):
    user = world.curator.user
    user.is_staff = user.is_superuser = True
    user.save()
    admin = client_for(world.curator)
    url = reverse("admin:annotation_golditem_add")
    assert admin.get(url).status_code == 200
    fields = {"conversation": world.c.id, "answer": "on", "rationale": RATIONALE}
    wrong = admin.post(url, {**fields, "response": world.responses[0].id, "criterion": world.c_cluster.id})
    assert wrong.status_code == 200
    assert "This response answers another conversation." in wrong.text
    both = admin.post(
        url,
        {
            **fields,
            "response": world.c_responses[0].id,
            "criterion": world.c_cluster.id,
            "consensus_criterion": world.catalogue[1].id,
        },
    )
    assert "Name a labeling item or a voting item, not both." in both.text
    assert not GoldItem.objects.exists()
    ok = admin.post(url, {**fields, "response": world.c_responses[0].id, "criterion": world.c_cluster.id})
    assert ok.status_code == 302
    assert GoldItem.objects.get().answer is True


def test_the_assignment_preview_counts_the_gold_items(world):
    _gold_labels(world)
    page = client_for(world.curator).get(
        reverse("assignments"),
        {"kind": "label", "per_item": "2", "limit": "1", "theme": "emergency_referrals", "physician_status": "trial"},
    )
    assert "Of these, 2 gold items for physicians on trial" in page.text
    assert "Assign 4 tasks" in page.text


# --- changing and removing -------------------------------------------------------------------------


def _answered_gold(world) -> tuple[GoldItem, Any]:
    """The first labeling gold item (known: met), answered "met" by the physician on trial."""
    first, _ = _gold_tasks(world)
    client_for(world.trial).post(reverse("label_item", args=[first.code]), {"met": "yes"})
    gold = GoldItem.objects.get(response_id=first.response_id, criterion_id=first.criterion_id)
    return gold, first


def test_a_curator_changes_a_gold_items_rationale_at_once(world):
    gold = _gold_labels(world)[0]
    curator = client_for(world.curator)
    page = curator.get(reverse("gold_items")).text
    assert reverse("gold_item_edit", args=[gold.id]) in page
    assert reverse("gold_item_remove", args=[gold.id]) in page
    form = curator.get(reverse("gold_item_edit", args=[gold.id])).text
    # The form starts from the item's known answer (met: "yes").
    (checked,) = re.findall(r'<input type="radio" name="known"[^>]*checked[^>]*>', form)
    assert 'value="yes"' in checked
    saved = curator.post(reverse("gold_item_edit", args=[gold.id]), {"known": "yes", "rationale": "Clearer now."})
    assert saved.status_code == 302
    gold.refresh_from_db()
    assert (gold.answer, gold.rationale) == (True, "Clearer now.")


def test_changing_an_answered_items_known_answer_says_whom_it_affects_and_waits_for_confirmation(world):
    gold, task = _answered_gold(world)
    curator = client_for(world.curator)
    url = reverse("gold_item_edit", args=[gold.id])
    asked = curator.post(url, {"known": "no", "rationale": gold.rationale})
    assert asked.status_code == 200
    assert "changes the gold accuracy of the 1 physician who answered this item: 1 matches" in asked.text
    assert 'name="confirm" value="yes"' in asked.text
    gold.refresh_from_db()
    assert gold.answer is True  # nothing changed yet
    done = curator.post(url, {"known": "no", "rationale": gold.rationale, "confirm": "yes"})
    assert done.status_code == 302
    gold.refresh_from_db()
    assert gold.answer is False
    # The physician's first answer ("met") is now wrong: their gold accuracy follows.
    quality = client_for(world.curator).get(reverse("physician_quality", args=[world.trial.code])).text
    assert "Right on 0 of 1 gold items answered" in quality
    # And what they read on the item says so.
    feedback = client_for(world.trial).get(reverse("label_item", args=[task.code])).text
    assert "<strong>not met</strong>" in feedback


def test_a_bad_edit_is_refused_with_the_field_named(world):
    gold = _gold_labels(world)[0]
    refused = client_for(world.curator).post(
        reverse("gold_item_edit", args=[gold.id]), {"known": "maybe", "rationale": "x" * 1001}
    )
    assert refused.status_code == 400
    assert "Select a valid choice" in refused.text
    assert "at most 1000 characters" in refused.text
    gold.refresh_from_db()
    assert gold.rationale.startswith(RATIONALE)


def test_removing_a_gold_mark_previews_then_keeps_the_physicians_work(world):
    gold, task = _answered_gold(world)
    curator = client_for(world.curator)
    url = reverse("gold_item_remove", args=[gold.id])
    preview = curator.get(url)
    assert preview.status_code == 200
    assert "1 physician's first answer on it leaves their gold accuracy" in preview.text
    assert GoldItem.objects.filter(id=gold.id).exists()  # a GET removes nothing
    removed = curator.post(url)
    assert removed.status_code == 302
    assert not GoldItem.objects.filter(id=gold.id).exists()
    assert not GoldAnswer.objects.filter(gold_id=gold.id).exists()
    # The label and the task stay, as ordinary work.
    assert Assignment.objects.filter(id=task.id).exists()
    assert world.trial.labels.filter(response_id=task.response_id, criterion_id=task.criterion_id).exists()
    listed = curator.get(reverse("gold_items"))
    assert "Gold mark removed; 1 first answer left the physicians&#x27; gold accuracy." in listed.text


def test_only_curators_change_or_remove_gold_and_a_missing_item_is_404(world):
    gold = _gold_labels(world)[0]
    for who in (world.trial, world.owner):
        client = client_for(who)
        for name in ("gold_item_edit", "gold_item_remove"):
            assert client.get(reverse(name, args=[gold.id])).status_code == 403
            assert client.post(reverse(name, args=[gold.id]), {"known": "no", "rationale": "r"}).status_code == 403
    gold.refresh_from_db()
    assert gold.answer is True
    curator = client_for(world.curator)
    assert curator.get(reverse("gold_item_edit", args=[gold.id + 999])).status_code == 404
    assert curator.post(reverse("gold_item_remove", args=[gold.id + 999])).status_code == 404
