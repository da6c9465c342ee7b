"""Vetting physicians, and what removing one takes out of what counts."""

import pytest
from django.urls import reverse

from annotation.models import Assignment, ConsensusVote, Criterion, Physician, PhysicianLabel
from annotation.services.vetting import physician_status_set
from tests.workspace import attach, client_for, make_world, physician

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings):
    settings.CONSENSUS_MIN_AGREE = 2
    return make_world()


def _set(client, who, status):
    return client.post(reverse("physician_status", args=[who.code]), {"status": status})


def _votes(world, entry, *voters):
    for voter in voters:
        ConsensusVote.objects.create(physician=voter, conversation=world.a, consensus_criterion=entry, applies=True)


@pytest.mark.parametrize(
    ("start", "goal"),
    [
        ("applicant", "trial"),
        ("trial", "active"),
        ("active", "removed"),
        ("trial", "removed"),
        ("applicant", "removed"),
    ],
)
def test_a_curator_moves_a_physician_along(world, start, goal):
    who = physician("dr_moving", status=start)
    response = _set(client_for(world.curator), who, goal)
    assert response.status_code == 302
    who.refresh_from_db()
    assert who.status == goal


@pytest.mark.parametrize(("start", "goal"), [("applicant", "active"), ("removed", "active"), ("active", "trial")])
def test_skipping_or_reversing_a_step_is_refused(world, start, goal):
    who = physician("dr_moving", status=start)
    page = client_for(world.curator).post(reverse("physician_status", args=[who.code]), {"status": goal}, follow=True)
    assert f"is {start} cannot become {goal}" in page.text
    who.refresh_from_db()
    assert who.status == start


def test_removal_detaches_what_only_their_vote_attached(world):
    entry = world.catalogue[1]
    _votes(world, entry, world.owner, world.colleague)
    criterion = attach(world.a, entry, origin=Criterion.Origin.VOTES)
    outcome = physician_status_set(physician=world.colleague, status=Physician.Status.REMOVED)
    assert outcome.recounted == 1
    assert not Criterion.objects.filter(id=criterion.id).exists()
    # Their votes stay, for audit.
    assert ConsensusVote.objects.filter(physician=world.colleague).count() == 1


def test_removal_keeps_an_attachment_that_still_has_enough_votes(world):
    entry = world.catalogue[1]
    _votes(world, entry, world.owner, world.colleague, world.outsider)
    criterion = attach(world.a, entry, origin=Criterion.Origin.VOTES)
    physician_status_set(physician=world.colleague, status=Physician.Status.REMOVED)
    assert Criterion.objects.filter(id=criterion.id).exists()


def test_removal_never_detaches_a_criterion_from_the_dataset(world):
    _votes(world, world.catalogue[0], world.owner, world.colleague)
    physician_status_set(physician=world.colleague, status=Physician.Status.REMOVED)
    assert Criterion.objects.filter(id=world.cluster.id).exists()


def test_becoming_active_makes_earlier_votes_count(world):
    entry = world.catalogue[1]
    _votes(world, entry, world.owner, world.trial)
    assert not Criterion.objects.filter(consensus_criterion=entry).exists()
    physician_status_set(physician=world.trial, status=Physician.Status.ACTIVE)
    assert Criterion.objects.get(consensus_criterion=entry).origin == Criterion.Origin.VOTES


def test_removal_flags_their_criteria_and_cancels_their_open_tasks(world):
    mine = Criterion.objects.create(conversation=world.a, text="Mine.", points=3, author=world.owner, origin="editor")
    done = world.vote_task
    done.status, done.completed = Assignment.Status.DONE, done.created
    done.save()
    outcome = physician_status_set(physician=world.owner, status=Physician.Status.REMOVED)
    mine.refresh_from_db()
    assert mine.flagged_for_review
    assert outcome.flagged == 1
    assert outcome.cancelled == 2  # rubric and ideal response; the done vote task stays done
    assert set(Assignment.objects.filter(physician=world.owner).values_list("status", flat=True)) == {
        "cancelled",
        "done",
    }


def test_removal_keeps_labels_and_marks_the_physician_removed_for_the_meta_eval(world):
    PhysicianLabel.objects.create(
        physician=world.colleague, response=world.responses[0], criterion=world.cluster, met=True
    )
    physician_status_set(physician=world.colleague, status=Physician.Status.REMOVED)
    assert PhysicianLabel.objects.filter(physician__status=Physician.Status.REMOVED).count() == 1


def test_a_removed_physician_can_no_longer_work(world):
    client = client_for(world.owner)
    physician_status_set(physician=world.owner, status=Physician.Status.REMOVED)
    assert client.get(reverse("rubric_editor", args=[world.a.code])).status_code == 403
    assert "no role in the programme" in client.get("/").text


def test_the_page_lists_physicians_and_only_curators_get_buttons(world):
    page = client_for(world.curator).get(reverse("physicians")).text
    assert "dr_applicant" in page
    assert "Start trial" in page
    assert "Make active" in page
    read_only = client_for(world.researcher).get(reverse("physicians")).text
    assert "dr_applicant" in read_only
    assert "Start trial" not in read_only


def test_the_page_filters_by_status(world):
    page = client_for(world.curator).get(reverse("physicians"), {"status": "trial"}).text
    assert "dr_trial" in page
    assert "dr_owner" not in page


def test_a_researcher_cannot_change_a_status(world):
    assert _set(client_for(world.researcher), world.owner, "removed").status_code == 403
    world.owner.refresh_from_db()
    assert world.owner.status == Physician.Status.ACTIVE


def test_the_page_costs_the_same_queries_however_many_physicians(world, django_assert_max_num_queries):
    client = client_for(world.curator)
    # Session, user, the physicians with their counts, the external physicians' count, and the
    # gold accuracy of the physicians on trial (one query for all: annotation/selectors/gold.py).
    with django_assert_max_num_queries(6):
        assert client.get(reverse("physicians")).status_code == 200
    for n in range(25):
        physician(f"dr_extra_{n}", status="trial")
    with django_assert_max_num_queries(6):
        assert client.get(reverse("physicians")).status_code == 200
