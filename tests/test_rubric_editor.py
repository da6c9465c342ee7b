"""The rubric editor: criteria added, edited and deleted in place, with and without htmx."""

import pytest
from django.urls import reverse

from annotation.models import Assignment, Criterion, CriterionEdit
from tests.workspace import attach, client_for, conversation, htmx, make_world, task

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


@pytest.fixture
def owner(world):
    return client_for(world.owner)


def _add(client, world, headers=None, **data):
    fields = {"text": "Advises calling emergency services now.", "points": "8", "axis": "completeness", **data}
    return client.post(reverse("criterion_add", args=[world.a.code]), fields, **(headers or {}))


def _mine(world):
    return Criterion.objects.filter(conversation=world.a, author=world.owner)


def test_it_shows_the_transcript_beside_the_rubric(world, owner):
    response = owner.get(reverse("rubric_editor", args=[world.a.code]))
    assert response.status_code == 200
    assert "crushing chest pain" in response.text
    assert world.imported.text in response.text
    assert 'id="add-criterion"' in response.text


def test_it_adds_a_criterion_without_javascript(world, owner):
    response = _add(owner, world)
    criterion = _mine(world).get()
    assert response.status_code == 302
    assert response.url.endswith(f"#criterion-{criterion.id}")
    assert (criterion.points, criterion.axis, criterion.tags) == (
        8,
        "completeness",
        ["level:example", "axis:completeness"],
    )
    assert criterion.origin == Criterion.Origin.EDITOR
    assert criterion.position > world.cluster.position


def test_it_adds_a_criterion_with_htmx_and_updates_the_total_out_of_band(world, owner):
    response = _add(owner, world, htmx())
    criterion = _mine(world).get()
    assert response.status_code == 200
    assert 'hx-swap-oob="beforeend:#criteria"' in response.text
    assert f'id="criterion-{criterion.id}"' in response.text
    assert 'id="rubric-summary" class="summary card" hx-swap-oob="true"' in response.text
    # 9 (the dataset's criterion) + 8; the consensus criterion is not part of the editor's rubric.
    assert '<strong class="total">17</strong>' in response.text
    assert "<html" not in response.text


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"points": "0"}, "0 points is not allowed"),
        ({"points": "11"}, "Points go up to 10"),
        ({"points": "-11"}, "Points go down to -10"),
        ({"points": "2.5"}, "whole number"),
        ({"points": ""}, "Give points from -10 to 10"),
        ({"axis": ""}, "Choose the axis"),
        ({"axis": "bedside_manner"}, "Select a valid choice"),
        ({"text": "   "}, "Write what a response should do or avoid"),
    ],
)
def test_it_refuses_a_bad_criterion_with_the_error_beside_the_field(world, owner, data, message):
    response = _add(owner, world, htmx(), **data)
    assert response.status_code == 200
    assert message in response.text
    assert 'aria-invalid="true"' in response.text
    assert not _mine(world).exists()


def test_it_rejects_zero_points_on_the_full_page_without_javascript(world, owner):
    response = _add(owner, world, points="0")
    assert response.status_code == 200
    assert "0 points is not allowed" in response.text
    assert "crushing chest pain" in response.text  # the whole page, transcript included
    assert 'value="Advises calling emergency services now."' not in response.text  # textarea keeps it as content
    assert "Advises calling emergency services now.</textarea>" in response.text


def test_it_warns_when_the_wording_and_the_sign_disagree(world, owner):
    _add(owner, world, text="Fails to mention aspirin.", points="5")
    page = owner.get(reverse("rubric_editor", args=[world.a.code])).text
    assert "Reads as a failure" in page
    assert "1 criterion reads against the sign" in page


def test_it_warns_about_near_duplicates(world, owner):
    _add(owner, world, text="Tells the user to call emergency services right now.")
    page = owner.get(reverse("rubric_editor", args=[world.a.code])).text
    assert "look alike" in page


def test_editing_records_who_when_before_and_after(world, owner):
    _add(owner, world)
    criterion = _mine(world).get()
    url = reverse("criterion_edit", args=[world.a.code, criterion.id])
    form = owner.get(url, **htmx())
    assert form.status_code == 200
    assert 'name="points"' in form.text
    assert 'value="8"' in form.text
    response = owner.post(url, {"text": "Advises calling 911 now.", "points": "9", "axis": "accuracy"}, **htmx())
    assert response.status_code == 200
    assert "Advises calling 911 now." in response.text
    edit = CriterionEdit.objects.get(action=CriterionEdit.Action.UPDATE)
    assert edit.physician == world.owner
    assert edit.criterion == criterion
    assert edit.created is not None
    assert edit.before == {"text": "Advises calling emergency services now.", "points": 8, "axis": "completeness"}
    assert edit.after == {"text": "Advises calling 911 now.", "points": 9, "axis": "accuracy"}
    criterion.refresh_from_db()
    assert criterion.tags == ["level:example", "axis:accuracy"]


def test_saving_without_changes_records_nothing(world, owner):
    _add(owner, world)
    criterion = _mine(world).get()
    owner.post(
        reverse("criterion_edit", args=[world.a.code, criterion.id]),
        {"text": criterion.text, "points": str(criterion.points), "axis": criterion.axis},
    )
    assert list(CriterionEdit.objects.values_list("action", flat=True)) == ["create"]


def test_editing_works_without_javascript(world, owner):
    _add(owner, world)
    criterion = _mine(world).get()
    url = reverse("criterion_edit", args=[world.a.code, criterion.id])
    page = owner.get(url)
    assert page.status_code == 200
    assert "crushing chest pain" in page.text
    assert "Save</button>" in page.text
    bad = owner.post(url, {"text": "x", "points": "0", "axis": "accuracy"})
    assert bad.status_code == 200
    assert "0 points is not allowed" in bad.text
    good = owner.post(url, {"text": "Advises calling 911.", "points": "-3", "axis": "accuracy"})
    assert good.status_code == 302
    criterion.refresh_from_db()
    assert criterion.points == -3


def test_cancel_puts_the_criterion_back(world, owner):
    _add(owner, world)
    criterion = _mine(world).get()
    response = owner.get(reverse("criterion_row", args=[world.a.code, criterion.id]), **htmx())
    assert response.status_code == 200
    assert f'id="criterion-{criterion.id}"' in response.text
    assert "<form class=" not in response.text


def test_deleting_keeps_the_text_in_the_audit(world, owner):
    _add(owner, world)
    criterion = _mine(world).get()
    response = owner.post(reverse("criterion_delete", args=[world.a.code, criterion.id]), **htmx())
    assert response.status_code == 200
    assert 'id="rubric-summary"' in response.text
    assert not _mine(world).exists()
    edit = CriterionEdit.objects.get(action=CriterionEdit.Action.DELETE)
    assert edit.criterion is None
    assert edit.before["text"] == "Advises calling emergency services now."
    assert edit.after is None


def test_submitting_marks_the_task_done_and_locks_the_rubric(world, owner):
    _add(owner, world)
    response = owner.post(reverse("rubric_submit", args=[world.a.code]))
    # On to the next open task: no other rubric is open, so the ideal response of the same conversation.
    assert response.status_code == 302
    assert response.url == reverse("ideal_editor", args=[world.a.code])
    world.rubric_task.refresh_from_db()
    assert world.rubric_task.status == Assignment.Status.DONE
    assert world.rubric_task.completed is not None
    assert _add(owner, world).status_code == 403
    page = owner.get(reverse("rubric_editor", args=[world.a.code]))
    assert page.status_code == 200
    assert "Submitted" in page.text
    assert 'id="add-criterion"' not in page.text


def test_a_rubric_without_positive_points_cannot_be_submitted(world, owner):
    fresh = conversation("conv-fresh")
    task(world.owner, Assignment.Kind.RUBRIC, fresh)
    owner.post(
        reverse("criterion_add", args=[fresh.code]), {"text": "Recommends bleach.", "points": "-9", "axis": "accuracy"}
    )
    response = owner.post(reverse("rubric_submit", args=[fresh.code]), follow=True)
    assert "at least one criterion with positive points" in response.text
    assert Assignment.objects.get(conversation=fresh).status == Assignment.Status.OPEN


def test_other_physicians_criteria_and_voted_consensus_criteria_stay_hidden(world, owner):
    Criterion.objects.create(
        conversation=world.a, text="Colleague's secret criterion.", points=4, author=world.colleague, origin="editor"
    )
    attach(world.a, world.catalogue[1], origin=Criterion.Origin.VOTES)
    page = owner.get(reverse("rubric_editor", args=[world.a.code])).text
    assert "Colleague&#x27;s secret criterion." not in page
    assert "Colleague's secret criterion." not in page
    assert world.catalogue[0].text not in page
    assert world.catalogue[1].text not in page


def test_a_physician_cannot_touch_a_criterion_they_did_not_write(world, owner):
    theirs = Criterion.objects.create(
        conversation=world.a, text="Theirs.", points=4, author=world.colleague, origin="editor"
    )
    for criterion in (theirs, world.imported, world.cluster):
        assert owner.get(reverse("criterion_edit", args=[world.a.code, criterion.id])).status_code == 404
        assert owner.post(reverse("criterion_delete", args=[world.a.code, criterion.id])).status_code == 404
    assert Criterion.objects.filter(id=theirs.id).exists()


def test_the_editor_costs_the_same_queries_whatever_the_rubric_size(world, owner, django_assert_max_num_queries):
    url = reverse("rubric_editor", args=[world.a.code])
    # With the session read from the database, the guideline and the new criterion's draft.
    # Plus, the first time a text is shown, one query for its rendered Markdown and one to store it.
    with django_assert_max_num_queries(10):  # +1: the time-on-task event (annotation/services/time_on_task.py)
        assert owner.get(url).status_code == 200
    for n in range(30):
        _add(owner, world, text=f"Criterion number {n} about something different {n * 13}.", points=str(n % 10 + 1))
    with django_assert_max_num_queries(10):  # +1: the time-on-task event (annotation/services/time_on_task.py)
        assert owner.get(url).status_code == 200


def test_adding_a_criterion_costs_a_bounded_number_of_queries(world, owner, django_assert_max_num_queries):
    # Includes the conversation's rubric version (annotation.rubric_versions) and the
    # time-on-task event of the answer (annotation/services/time_on_task.py).
    with django_assert_max_num_queries(15):
        assert _add(owner, world, htmx()).status_code == 200
