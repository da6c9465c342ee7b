"""Labeling: one response and one criterion at a time, met or not met, next item without a reload."""

import pytest
from django.urls import reverse

from annotation.models import Assignment, PhysicianLabel
from grading.models import Grade, Run
from tests.workspace import client_for, htmx, make_world, task

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


@pytest.fixture
def labeler(world):
    return client_for(world.colleague)


def _url(t: Assignment) -> str:
    return reverse("label_item", args=[t.code])


def test_labels_opens_on_the_first_open_item(world, labeler):
    response = labeler.get(reverse("label_next"))
    assert response.status_code == 302
    assert response.url == _url(world.label_task)


def test_the_item_shows_the_response_and_the_criterion(world, labeler):
    page = labeler.get(_url(world.label_task)).text
    assert world.responses[0].text in page
    assert world.cluster.text in page
    assert "0</strong> of 2 labeled" in page
    assert 'data-key="m"' in page
    assert 'data-key="n"' in page
    assert 'data-key="ArrowRight"' in page


def test_it_never_shows_other_labels_or_the_grader_decision(world, labeler):
    PhysicianLabel.objects.create(
        physician=world.outsider,
        response=world.responses[0],
        criterion=world.cluster,
        met=True,
        comment="OTHER-PHYSICIAN-NOTE",
    )
    run = Run.objects.create(plan=Run.Plan.STORED, name="run-1")
    Grade.objects.create(
        run=run,
        response=world.responses[0],
        criterion=world.cluster,
        criterion_text=world.cluster.text,
        points=5,
        met=True,
        explanation="GRADER-EXPLANATION",
    )
    page = labeler.get(_url(world.label_task)).text
    assert "OTHER-PHYSICIAN-NOTE" not in page
    assert "GRADER-EXPLANATION" not in page
    assert "chosen" not in page  # no answer pre-selected: this physician has not labeled it


def test_labeling_with_htmx_swaps_in_the_next_item_and_updates_the_address(world, labeler):
    response = labeler.post(_url(world.label_task), {"met": "yes", "comment": " clear advice "}, **htmx())
    assert response.status_code == 200
    assert response.headers["HX-Push-Url"] == _url(world.next_label_task)
    assert world.responses[1].text in response.text
    assert "<html" not in response.text
    label = PhysicianLabel.objects.get(physician=world.colleague)
    assert (label.met, label.comment, label.response, label.criterion) == (
        True,
        "clear advice",
        world.responses[0],
        world.cluster,
    )
    world.label_task.refresh_from_db()
    assert world.label_task.status == Assignment.Status.DONE


def test_labeling_without_javascript_redirects_to_the_next_item(world, labeler):
    response = labeler.post(_url(world.label_task), {"met": "no"})
    assert response.status_code == 302
    assert response.url == _url(world.next_label_task)
    assert PhysicianLabel.objects.get(physician=world.colleague).met is False


def test_after_the_last_item_it_says_everything_is_done(world, labeler):
    labeler.post(_url(world.label_task), {"met": "no"})
    response = labeler.post(_url(world.next_label_task), {"met": "yes"}, **htmx())
    assert "Nothing left to label" in response.text
    assert response.headers["HX-Push-Url"] == reverse("label_next")
    assert "Nothing left to label" in labeler.get(reverse("label_next")).text


def test_a_skipped_item_comes_back(world, labeler):
    labeler.get(_url(world.label_task))  # skipped: no answer
    response = labeler.post(_url(world.next_label_task), {"met": "yes"})
    assert response.url == _url(world.label_task)


def test_a_label_can_be_changed_and_shows_the_physicians_own_answer(world, labeler):
    labeler.post(_url(world.label_task), {"met": "yes"})
    page = labeler.get(_url(world.label_task)).text
    assert "you labeled this item met" in page
    labeler.post(_url(world.label_task), {"met": "no", "comment": "on reflection"})
    label = PhysicianLabel.objects.get(physician=world.colleague)
    assert (label.met, label.comment) == (False, "on reflection")


def test_a_forged_answer_is_refused_and_shown(world, labeler):
    response = labeler.post(_url(world.label_task), {"met": "perhaps"}, **htmx())
    assert response.status_code == 200
    assert "Select a valid choice" in response.text
    assert not PhysicianLabel.objects.exists()


def test_a_history_restore_gets_the_whole_page(world, labeler):
    response = labeler.get(_url(world.label_task), **htmx(HTTP_HX_HISTORY_RESTORE_REQUEST="true"))
    assert "<html" in response.text


def test_the_rubric_author_cannot_label_that_conversation(world):
    # The assignment page never does this; an item made by hand in the admin is still refused.
    item = task(world.owner, Assignment.Kind.LABEL, world.a, response=world.responses[0], criterion=world.cluster)
    client = client_for(world.owner)
    page = client.get(_url(item))
    assert page.status_code == 403
    assert "nobody labels responses against a rubric they wrote" in page.text
    # No other labeling item: the page leads to the owner's next task of another kind.
    assert "Next task: write ideal response" in page.text
    assert client.post(_url(item), {"met": "yes"}).status_code == 403
    assert not PhysicianLabel.objects.exists()


def test_an_impossible_item_is_withdrawn_with_a_note_for_the_curator(world):
    # Nobody else holds the item yet (the colleague's task on it is taken back).
    Assignment.objects.filter(id=world.label_task.id).update(status=Assignment.Status.CANCELLED)
    item = task(world.owner, Assignment.Kind.LABEL, world.a, response=world.responses[0], criterion=world.cluster)
    client = client_for(world.owner)
    page = client.get(_url(item))
    # Opening the page only says why (a GET writes nothing); its button takes the item back.
    item.refresh_from_db()
    assert item.status == Assignment.Status.OPEN
    assert "Take it off my list" in page.text
    taken = client.post(_url(item), {"withdraw": "yes"})
    assert taken.status_code == 200
    assert "It has been taken off your list" in taken.text
    item.refresh_from_db()
    assert item.status == Assignment.Status.WITHDRAWN
    assert "rubric they wrote" in item.note
    assert "rubric they wrote" in client_for(world.curator).get(reverse("assignments")).text
    # Once the item is given to someone else, the row has done its work and leaves the list.
    task(world.outsider, Assignment.Kind.LABEL, world.a, response=world.responses[0], criterion=world.cluster)
    assert "rubric they wrote" not in client_for(world.curator).get(reverse("assignments")).text


def test_the_author_of_a_drafted_conversation_cannot_label_it(world):
    world.a.author = world.outsider
    world.a.save(update_fields=["author"])
    item = task(world.outsider, Assignment.Kind.LABEL, world.a, response=world.responses[0], criterion=world.cluster)
    assert client_for(world.outsider).get(_url(item)).status_code == 403


def test_a_physician_cannot_open_someone_elses_item(world):
    client = client_for(world.outsider)
    assert client.get(_url(world.label_task)).status_code == 404
    assert client.post(_url(world.label_task), {"met": "yes"}).status_code == 404


def test_an_item_costs_the_same_queries_however_many_items_there_are(world, labeler, django_assert_max_num_queries):
    url = _url(world.label_task)
    # Beside the item and its position: the session, the guideline and the comment's draft; the
    # first time its texts are shown, one query for their rendered Markdown and one to store it.
    with django_assert_max_num_queries(11):  # +1: the time-on-task event (annotation/services/time_on_task.py)
        assert labeler.get(url).status_code == 200
    extra = [
        task(world.colleague, Assignment.Kind.LABEL, world.a, response=world.responses[n % 2], criterion=c)
        for n, c in enumerate(
            world.a.criteria.model.objects.bulk_create(
                [
                    world.a.criteria.model(conversation=world.a, text=f"c{n}", points=5, level="cluster")
                    for n in range(20)
                ]
            )
        )
    ]
    assert len(extra) == 20
    # The texts' Markdown is now in this process: nothing more to fetch.
    with django_assert_max_num_queries(9):  # +1: the time-on-task event (annotation/services/time_on_task.py)
        assert labeler.get(url).status_code == 200


def test_labeling_costs_a_bounded_number_of_queries(world, labeler, django_assert_max_num_queries):
    # The next item's texts may be new: one query for their rendered Markdown and one to store it.
    # +1: the time-on-task event (annotation/services/time_on_task.py); +4: the label and the event
    # each mark the physician quality figures as changed (annotation/services/quality_refresh.py,
    # an update and an insert-on-conflict per mark).
    with django_assert_max_num_queries(26):
        assert labeler.post(_url(world.label_task), {"met": "yes"}, **htmx()).status_code == 200
