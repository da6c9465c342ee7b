"""Physician quality pages (grading/physicians): time on task recorded by the server on each
task page, the planted programme's outliers found and no others, who may read what, and the
accounts CSV adding up to the time recorded."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from annotation.models import Assignment, CantJudge, ConsensusVote, PhysicianLabel, TaskEvent
from grading.physicians import selectors
from tests.physician_programme import planted_programme
from tests.workspace import client_for, make_world, physician

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache():
    # The programme's figures are cached by a fingerprint of ids and counts, and test databases
    # reuse ids: one test's figures must not answer another's.
    cache.clear()


@pytest.fixture
def world():
    return make_world()


def test_opening_a_label_page_and_answering_are_recorded_with_the_task(world):
    item = world.label_task
    client = client_for(world.colleague)
    assert client.get(f"/labels/{item.code}/").status_code == 200
    assert client.post(f"/labels/{item.code}/", {"met": "yes", "comment": ""}).status_code == 302
    kinds = list(TaskEvent.objects.filter(assignment=item).order_by("id").values_list("kind", flat=True))
    assert kinds == ["open", "answer"]


def test_each_task_page_records_its_opening(world):
    client = client_for(world.owner)
    code = world.a.code
    for path in (f"/conversations/{code}/rubric/", f"/conversations/{code}/ideal/", f"/conversations/{code}/votes/"):
        assert client.get(path).status_code == 200
    opened = TaskEvent.objects.filter(assignment__physician=world.owner, kind="open")
    assert sorted(opened.values_list("assignment__kind", flat=True)) == ["consensus_vote", "ideal_response", "rubric"]


def test_a_curator_reading_a_conversation_records_nothing(world):
    assert client_for(world.curator).get(f"/conversations/{world.a.code}/").status_code == 200
    assert not TaskEvent.objects.exists()


def test_a_draft_saved_while_typing_is_work_on_its_task(world):
    client = client_for(world.owner)
    response = client.post("/drafts/", {"key": f"ideal:{world.a.code}", "text": "Call an ambulance"})
    assert response.status_code == 200
    event = TaskEvent.objects.get()
    assert event.kind == "draft"
    assert event.assignment.kind == Assignment.Kind.IDEAL_RESPONSE


def test_idle_gaps_are_cut_out_of_active_time(world, settings):
    settings.TIME_ON_TASK_IDLE_SECONDS = 300
    item = world.label_task
    t0 = timezone.now() - timedelta(hours=1)
    for kind, seconds in (("open", 0), ("draft", 40), ("open", 40 + 3600), ("answer", 40 + 3600 + 20)):
        TaskEvent.objects.create(assignment=item, kind=kind, at=t0 + timedelta(seconds=seconds))
    PhysicianLabel.objects.create(
        physician=world.colleague, response=world.responses[0], criterion=world.cluster, met=True
    )
    Assignment.objects.filter(pk=item.pk).update(status="done", completed=t0 + timedelta(seconds=3660))
    times = selectors.task_times(physician_ids=[world.colleague.pk])
    # SQLite gives seconds to the millisecond (julianday), PostgreSQL to the microsecond.
    assert times.seconds[times.timed].tolist() == [pytest.approx(60.0, abs=0.01)]


def test_the_accounts_csv_adds_up_to_the_time_recorded(world):
    item = world.label_task
    t0 = timezone.now() - timedelta(days=2)
    TaskEvent.objects.create(assignment=item, kind="open", at=t0)
    TaskEvent.objects.create(assignment=item, kind="answer", at=t0 + timedelta(seconds=90))
    Assignment.objects.filter(pk=item.pk).update(status="done", completed=t0 + timedelta(seconds=90))
    response = client_for(world.curator).get(f"/physicians/{world.colleague.code}/quality.csv")
    assert response.status_code == 200
    header, *rows = response.content.decode().splitlines()
    assert header == "week,rubric,ideal_response,consensus_vote,label,active_hours"
    assert len(rows) == 1
    cells = rows[0].split(",")
    assert cells[4] == "1"
    assert float(cells[5]) == pytest.approx(90 / 3600, abs=1e-3)


def test_a_physician_reads_only_their_own_page_and_no_ranking(world):
    client = client_for(world.colleague)
    own = client.get(f"/physicians/{world.colleague.code}/quality/")
    assert own.status_code == 200
    assert b"others' median" not in own.content
    assert b"All physicians" not in own.content
    assert client.get(f"/physicians/{world.owner.code}/quality/").status_code == 404
    assert client.get("/curator/physicians/quality/").status_code == 403
    assert client.get(f"/physicians/{world.owner.code}/quality.csv").status_code == 404


def test_researchers_and_outsiders_read_no_physician_page(world):
    for who in (world.researcher, world.outsider):
        assert client_for(who).get(f"/physicians/{world.colleague.code}/quality/").status_code == 404
    assert client_for(world.researcher).get("/curator/physicians/quality/").status_code == 403


def test_curators_read_every_physician_page(world):
    client = client_for(world.curator)
    for who in (world.owner, world.colleague, world.trial):
        assert client.get(f"/physicians/{who.code}/quality/").status_code == 200
    assert client.get("/curator/physicians/quality/").status_code == 200


def test_votes_are_counted_against_whether_the_criterion_was_attached(world):
    votes = ConsensusVote.objects.filter(physician=world.owner)
    outcome = selectors.vote_outcomes(world.owner.pk)
    assert outcome["votes"] == votes.count()


def test_a_rubric_submitted_past_its_sign_warnings_counts_them(world):
    client = client_for(world.owner, csrf=False)
    code = world.a.code
    added = client.post(
        f"/conversations/{code}/rubric/criteria/",
        {"text": "States that it is just heartburn and nothing to worry about.", "points": "6", "axis": "accuracy"},
    )
    assert added.status_code == 302
    client.post(f"/conversations/{code}/rubric/submit/", {"confirm": "sign"})
    submitted = TaskEvent.objects.filter(assignment__physician=world.owner, assignment__kind="rubric", kind="answer")
    assert Assignment.objects.get(physician=world.owner, kind="rubric", conversation=world.a).is_done
    assert (
        sum(submitted.values_list("sign_warnings", flat=True))
        == selectors.rubric_outcomes(world.owner.pk)["sign_warnings_submitted"]
    )
    assert selectors.rubric_outcomes(world.owner.pk) == {
        "criteria": 1,
        "changed_by_curators": 0,
        "sign_warnings_submitted": 1,
    }


def test_the_planted_programme_flags_exactly_the_planted_physicians():
    planted = planted_programme()
    assert PhysicianLabel.objects.count() + CantJudge.objects.count() == 20_000
    programme = selectors.programme()
    flags = {pk: sorted(f["measure"] for f in fs) for pk, fs in programme.flags.items()}
    assert flags == {
        planted.sloppy.pk: ["agreement"],
        planted.slow.pk: ["active_time"],
        planted.unsure.pk: ["cant_judge"],
    }
    curator = physician("lead", role="curator")
    page = client_for(curator).get("/curator/physicians/quality/").content.decode()
    for who in (planted.sloppy, planted.slow, planted.unsure):
        assert f'id="flagged-{who.code}"' in page
    assert page.count('id="flagged-') == 3
    # The evidence: items where the sloppy physician differed, and from whom.
    assert "Items where they disagreed" in page


def _api(who):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=who.user)[0].key}")
    return client


def test_the_api_gives_curators_every_physician_and_a_physician_their_own_figures(world):
    listing = _api(world.curator).get("/api/physicians/")
    assert listing.status_code == 200
    codes = {row["code"] for row in listing.json()}
    assert str(world.colleague.code) in codes
    assert str(world.removed.code) not in codes
    own = _api(world.colleague).get(f"/api/physicians/{world.colleague.code}/")
    assert own.status_code == 200
    assert own.json()["flags"] == []
    assert set(own.json()) >= {"agreement", "label_seconds", "cant_judge", "weeks", "votes", "rubric"}
    assert _api(world.colleague).get(f"/api/physicians/{world.owner.code}/").status_code == 404
    assert _api(world.colleague).get("/api/physicians/").status_code == 403
    assert _api(world.researcher).get("/api/physicians/").status_code == 403


def test_the_accounts_add_up_per_period_and_for_the_programme(world):
    t0 = timezone.now().replace(year=2026, month=3, day=2, hour=9, minute=0, second=0, microsecond=0)
    for item, day, seconds in ((world.label_task, 0, 90), (world.next_label_task, 10, 30)):
        TaskEvent.objects.create(assignment=item, kind="open", at=t0 + timedelta(days=day))
        TaskEvent.objects.create(assignment=item, kind="answer", at=t0 + timedelta(days=day, seconds=seconds))
        Assignment.objects.filter(pk=item.pk).update(status="done", completed=t0 + timedelta(days=day, seconds=seconds))
    client = client_for(world.curator)
    everything = client.get("/curator/physicians/accounts/?format=csv").content.decode().splitlines()
    assert everything[0] == "physician,rubric,ideal_response,consensus_vote,label,active_hours"
    assert everything[-1] == f"programme total,0,0,0,2,{round(120 / 3600, 3)}"
    first_week = client.get("/curator/physicians/accounts/?start=2026-03-01&end=2026-03-08&format=csv")
    lines = first_week.content.decode().splitlines()
    assert lines[1] == f"dr_colleague,0,0,0,1,{round(90 / 3600, 3)}"
    assert lines[-1] == f"programme total,0,0,0,1,{round(90 / 3600, 3)}"
    page = client.get("/curator/physicians/accounts/?start=2026-03-01&end=2026-03-08")
    assert page.status_code == 200
    assert b"Programme totals" in page.content
    totals = client.get("/curator/physicians/accounts/", headers={"HX-Request": "true"})
    assert b"<h1>" not in totals.content
    assert b"Programme totals" in totals.content
    assert b"physician_accounts" not in client.get("/stats/").content
    assert b"/curator/physicians/accounts/" in client.get("/stats/").content
    assert client_for(world.researcher).get("/curator/physicians/accounts/").status_code == 403
    assert b"/curator/physicians/accounts/" not in client_for(world.researcher).get("/stats/").content


def test_the_agreement_chart_is_for_curators_and_the_week_chart_for_both():
    planted = planted_programme(n_physicians=6, n_labels=600)
    curator = physician("lead", role="curator")
    seen = client_for(curator).get(f"/physicians/{planted.slow.code}/quality/").content.decode()
    assert "other physicians as dots and a box" in seen
    assert "Tasks done per week, at most" in seen
    assert seen.count("<circle") == 5  # the five others
    assert planted.slow.user is not None
    own = client_for(planted.slow).get(f"/physicians/{planted.slow.code}/quality/").content.decode()
    assert "other physicians as dots" not in own
    assert "<circle" not in own
    assert "Tasks done per week, at most" in own
