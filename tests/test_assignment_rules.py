"""Assignment never gives out a task its physician may not do, and says why a physician was skipped.

Two physicians and one conversation with two responses and one consensus criterion: the
situation of the demo programme, where a curator assigns "Label responses" and "Write rubric"
with 2 physicians per item, in either order.
"""

import pytest
from django.urls import reverse

from annotation.models import Assignment
from annotation.services.assignments import assignments_create
from grading.models import Response
from tests.workspace import THEME, attach, client_for, consensus, conversation, physician

pytestmark = pytest.mark.django_db


@pytest.fixture
def programme():
    doctors = [physician("physician"), physician("physician2")]
    curator = physician("cur", role="curator")
    conv = conversation("p-1")
    attach(conv, consensus(f"{THEME}_0"))
    for n in range(2):
        Response.objects.create(conversation=conv, text=f"Response {n}", model_name="m", sample_index=n)
    return doctors, curator, conv


def _assign(kind, doctors, curator, conv):
    return assignments_create(
        kind=kind, conversation_ids=[conv.id], physicians=doctors, per_item=2, assigned_by=curator
    )


def test_labeling_after_the_rubric_creates_nothing_and_says_who_was_skipped_and_why(programme):
    doctors, curator, conv = programme
    _assign(Assignment.Kind.RUBRIC, doctors, curator, conv)
    summary = _assign(Assignment.Kind.LABEL, doctors, curator, conv)
    assert summary.created == 0
    assert summary.short == 2
    (reason,) = summary.reasons
    assert reason.startswith("p-1 (2 items): has 0 of 2 physicians")
    assert "skipped physician and physician2, who wrote or write its rubric" in reason


def test_the_assignment_page_shows_the_reasons(programme):
    doctors, curator, conv = programme
    _assign(Assignment.Kind.RUBRIC, doctors, curator, conv)
    client = client_for(curator)
    fields = {"kind": "label", "limit": "50", "per_item": "2", "condition": "no_reference"}
    page = client.post(reverse("assignments"), fields, follow=True).text
    assert "0 tasks created over 2 items" in page
    assert "skipped physician and physician2, who wrote or write its rubric" in page


def test_a_rubric_assigned_after_labeling_withdraws_the_writers_open_labeling_tasks(programme):
    doctors, curator, conv = programme
    assert _assign(Assignment.Kind.LABEL, doctors, curator, conv).created == 4
    summary = _assign(Assignment.Kind.RUBRIC, doctors, curator, conv)
    assert summary.created == 2
    assert summary.withdrawn == 4
    assert "4 open labeling tasks of the new rubric writers were withdrawn" in str(summary)
    labels = Assignment.objects.filter(kind=Assignment.Kind.LABEL)
    assert set(labels.values_list("status", flat=True)) == {Assignment.Status.WITHDRAWN}
    assert all("rubric they wrote" in note for note in labels.values_list("note", flat=True))


def test_withdrawn_tasks_leave_the_physicians_home_and_appear_for_the_curator(programme):
    doctors, curator, conv = programme
    _assign(Assignment.Kind.LABEL, doctors, curator, conv)
    _assign(Assignment.Kind.RUBRIC, doctors, curator, conv)
    home = client_for(doctors[0]).get("/").text
    assert "Label responses" in home
    card = home.split('id="tasks-label"')[1].split("</article>")[0]
    assert "Nothing assigned." in card
    assert "2 tasks taken off your list: you write the rubric of their conversations" in card
    progress = client_for(curator).get(reverse("assignments")).text
    assert "Withdrawn tasks" in progress
    assert progress.count("rubric they wrote") == 4


def test_a_done_labeling_task_stays_done_when_its_physician_gets_the_rubric(programme):
    doctors, curator, conv = programme
    _assign(Assignment.Kind.LABEL, doctors, curator, conv)
    first = Assignment.objects.filter(physician=doctors[0], kind=Assignment.Kind.LABEL).first()
    client_for(doctors[0]).post(reverse("label_item", args=[first.code]), {"met": "yes"})
    _assign(Assignment.Kind.RUBRIC, doctors, curator, conv)
    first.refresh_from_db()
    assert first.status == Assignment.Status.DONE
