"""The report pages: runs list, a run's report, downloads and graded transcripts."""

import csv
import io
import json

import pytest
from django.contrib.auth.models import User
from django.db.models import F
from django.urls import reverse

from annotation.models import Physician
from grading.models import Grade, Response, Run
from grading.reports import report as run_report_module
from grading.reports.report import grading_record, responses_record, run_report
from tests import healthbench_rows as rows
from tests.test_import_run import graded_row, import_dataset, import_run, write_results
from tests.test_run_report import import_fixture


def make_user(role: str) -> User:
    user = User.objects.create_user(username=role, password="pw-for-tests")
    Physician.objects.create(user=user, role=role)
    return user


@pytest.fixture
def run(db, tmp_path) -> Run:
    """The 'mixed' golden fixture: 14 conversations x 4 samples, some negative scores."""
    return import_fixture("mixed", tmp_path)


@pytest.fixture
def researcher(client, db):
    client.force_login(make_user(Physician.Role.RESEARCHER))
    return client


def urls(run: Run) -> list[str]:
    response = Response.objects.first()
    return [
        reverse("report_list"),
        reverse("report_detail", args=[run.code]),
        reverse("report_json", args=[run.code]),
        reverse("report_csv", args=[run.code]),
        reverse("report_transcript", args=[run.code, response.code]),
    ]


# --- who may read ---------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_the_login_page(client, run):
    for url in urls(run):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("login")), url


def test_physicians_may_not_read_reports(client, run):
    client.force_login(make_user(Physician.Role.PHYSICIAN))
    for url in urls(run):
        assert client.get(url).status_code == 403, url


@pytest.mark.parametrize("role", [Physician.Role.RESEARCHER, Physician.Role.CURATOR])
def test_researchers_and_curators_read_every_page(client, run, role):
    client.force_login(make_user(role))
    for url in urls(run):
        assert client.get(url).status_code == 200, url


def test_an_unknown_run_or_a_response_outside_the_run_is_not_found(researcher, run, tmp_path):
    other = Run.objects.create(plan=Run.Plan.STORED, name="other")
    response = Response.objects.first()
    assert researcher.get(reverse("report_detail", args=["00000000-0000-4000-8000-000000000000"])).status_code == 404
    assert researcher.get(reverse("report_transcript", args=[other.code, response.code])).status_code == 404


# --- what they read -------------------------------------------------------------------------


def test_the_runs_list_links_to_each_report(researcher, run):
    page = researcher.get(reverse("report_list")).content.decode()
    assert reverse("report_detail", args=[run.code]) in page
    assert run.name in page


def test_the_report_shows_score_tables_curve_and_consensus_rates(researcher, run):
    data = run_report(run=run).data
    page = researcher.get(reverse("report_detail", args=[run.code])).content.decode()
    assert f"{data['score']:.3f}" in page
    assert f"{data['metrics']['overall_score:bootstrap_std']:.3f}" in page
    assert "theme:hedging" in page
    assert "axis:accuracy" in page
    assert "<svg" in page
    assert "<polyline" in page
    for k in data["worst_at_k"]:
        assert f"k={k}" in page
    assert "cluster:c0" in page
    assert reverse("report_json", args=[run.code]) in page
    assert reverse("report_csv", args=[run.code]) in page


def test_examples_are_listed_worst_first_and_paged(researcher, db, tmp_path):
    run = import_fixture("bootstrap", tmp_path)  # 400 responses: 8 pages of 50
    report = run_report(run=run)
    url = reverse("report_detail", args=[run.code])
    first = researcher.get(url)
    assert first.context["examples"][0]["score"] == min(report.ranked_scores)
    assert [e["rank"] for e in first.context["examples"]] == list(range(1, 51))
    scores = [e["score"] for e in first.context["examples"]]
    assert scores == sorted(scores)
    last = researcher.get(url, {"page": 8})
    assert last.context["examples"][-1]["rank"] == 400
    assert last.context["examples"][-1]["score"] == max(report.ranked_scores)


def test_an_htmx_page_request_gets_only_the_examples_fragment(researcher, run):
    response = researcher.get(reverse("report_detail", args=[run.code]), {"page": 1}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="examples">')
    assert "<html" not in html
    assert "<svg" not in html


def test_left_out_examples_come_last_and_say_why(researcher, db, tmp_path):
    data = rows.row("p-1")
    import_dataset(tmp_path, data)
    examples = [graded_row(data, [True, None, False]), graded_row(data, [True, False, False])]
    import_run(write_results(tmp_path / "r.json", examples), name="partial")
    page = researcher.get(reverse("report_detail", args=[Run.objects.get(name="partial").code]))
    assert [e["status"] for e in page.context["examples"]] == ["scored", "incomplete"]
    assert "left out: grade failed or missing" in page.content.decode()


def test_the_json_download_is_the_report(researcher, run):
    response = researcher.get(reverse("report_json", args=[run.code]))
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="mixed-report.json"'
    document = json.loads(response.content)
    # With how it was graded beside the numbers (null for an imported run).
    assert document.pop("grading") == grading_record(run)
    assert document.pop("responses") == responses_record(run) == {"origin": "stored", "model": run.policy_model}
    assert document == json.loads(json.dumps(run_report(run=run).data))


def test_the_csv_download_has_one_row_per_metric(researcher, run):
    response = researcher.get(reverse("report_csv", args=[run.code]))
    assert response["Content-Disposition"] == 'attachment; filename="mixed-report.csv"'
    table = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert table[0]["name"] == "score"
    assert {"overall_score", "theme:hedging", "cluster:c0"} <= {row["name"] for row in table}


def test_the_transcript_shows_the_conversation_the_response_and_every_grade(researcher, db, tmp_path):
    data = rows.row("p-1")
    import_dataset(tmp_path, data)
    path = write_results(tmp_path / "r.json", [graded_row(data, [True, None, False], completion="Drink water & rest.")])
    import_run(path, name="transcript")
    run, response = Run.objects.get(), Response.objects.get()
    page = researcher.get(reverse("report_transcript", args=[run.code, response.code])).content.decode()
    assert "I am 34 and otherwise fine." in page
    assert "Drink water &amp; rest." in page
    for grade in Grade.objects.filter(run=run):
        assert grade.criterion_text in page
        assert grade.explanation in page
    assert page.count('class="met"') == 1
    assert page.count('class="failed"') == 1
    assert "left out of the score: 1 grade failed" in page
    assert page.count('class="not-met"') == 1


# --- speed ----------------------------------------------------------------------------------


def test_the_report_is_computed_once_until_the_run_moves_on(researcher, run, monkeypatch):
    calls = []
    real = run_report_module.run_report

    def counting(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(run_report_module, "run_report", counting)
    url = reverse("report_detail", args=[run.code])
    researcher.get(url)
    researcher.get(url, {"page": 2})
    researcher.get(reverse("report_json", args=[run.code]))
    assert len(calls) == 1
    Grade.objects.filter(run=run, position=0).update(met=None, status=Grade.Status.FAILED)
    researcher.get(url)
    assert len(calls) == 1, "grades changed outside a progress step: the cached step still stands"
    # What the pipeline does at each progress step and at the run's end.
    Run.objects.filter(id=run.id).update(report_version=F("report_version") + 1)
    page = researcher.get(url)
    assert len(calls) == 2
    assert page.context["data"]["counts"]["failed"] > 0


def test_query_counts_stay_fixed(researcher, run, django_assert_max_num_queries):
    url = reverse("report_detail", args=[run.code])
    # Session, user, role, run, grades (on PostgreSQL grouped by their tag list's hash, then the
    # lists read from each group's first grade), responses, conversations, the page's rows, the
    # finished run's report kept in the database (looked up, then written in a savepoint),
    # whether the run has a calibration sample, and the drift notice's baseline recorded once
    # (grading.drift: in a savepoint, the run locked, the run's items, the conversations'
    # rubric versions and live criteria, its rows written, the run marked, then their sums).
    with django_assert_max_num_queries(24):
        researcher.get(url)
    # From the cache: session, user, role, run, the drift notice's sums, the page's rows, and
    # whether the run has a calibration sample.
    with django_assert_max_num_queries(7):
        researcher.get(url, {"page": 2})
    with django_assert_max_num_queries(5):
        researcher.get(reverse("report_list"))
    response = Response.objects.first()
    with django_assert_max_num_queries(6):
        researcher.get(reverse("report_transcript", args=[run.code, response.code]))


def test_the_report_says_which_bootstrap_drew_its_stds(researcher, run):
    # Every new run draws them as the reference does; a run recorded with the Poisson draw keeps
    # it, and its report says so on the page, in the JSON and in the CSV.
    assert run.bootstrap == Run.Bootstrap.ONE_DRAW
    page = researcher.get(reverse("report_detail", args=[run.code])).content.decode()
    assert "drawn with replacement (the reference&#x27;s draw)" in page
    assert "<code>one-draw</code>" in page
    Run.objects.filter(id=run.id).update(bootstrap=Run.Bootstrap.SHARED)
    document = json.loads(researcher.get(reverse("report_json", args=[run.code])).content)
    assert document["bootstrap"]["method"] == "shared"
    assert "Poisson" in document["bootstrap"]["description"]
    table = list(csv.DictReader(io.StringIO(researcher.get(reverse("report_csv", args=[run.code])).content.decode())))
    assert {"name": "bootstrap:method", "value": "shared", "n_samples": "", "bootstrap_std": ""} in table
