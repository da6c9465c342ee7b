"""The physicians' responses as a response source: a run grades the `physician_response` of each
HealthBench Professional row with its rubric, like a model's responses, through `grade`, the API
and the launch page alike; its report names the responses the physicians' (model "physician")
and scores them with Professional's length adjustment. A subset without physician responses is
refused, saying why. Grades come from the local test server (tests/llm_server.py)."""

import csv
import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Physician, Subset
from grading.models import Grade, Response, Run
from grading.pipeline.physician_responses import PHYSICIAN_MODEL
from grading.reports.report import report_csv, run_report_document
from tests.endpoints import endpoint_on
from tests.healthbench_rows import row, write
from tests.people import person
from tests.test_grade_command import grade, grader_args  # noqa: F401 (fixture)
from tests.test_import_professional import professional_row
from tests.test_run_request import api_request, command_request, page_request

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_tasks")]

DR_B = "Refer to cardiology within two weeks; start a DOAC today if no contraindication. \u2014 Dr B"


def _import(tmp_path, *rows, subset: str = "pro") -> None:
    path = tmp_path / f"{subset}.jsonl"
    write(path, *rows)
    call_command("import_healthbench", path, "--subset", subset, stdout=io.StringIO())


def _professional(tmp_path) -> None:
    """Three Professional rows of three criteria each; the third has no physician response."""
    _import(
        tmp_path,
        professional_row("pro-1"),
        professional_row("pro-2", physician_response=DR_B, specialty="general"),
        professional_row("pro-3", physician_response=None),
    )


def _api() -> APIClient:
    client = APIClient()
    client.force_authenticate(person("api", Physician.Role.RESEARCHER))
    return client


def _physician_responses() -> dict[str, str]:
    return dict(
        Response.objects.filter(source=Response.Source.PHYSICIAN).values_list("conversation__prompt_id", "text")
    )


@pytest.mark.django_db(transaction=True)
def test_grade_grades_the_physicians_responses_and_the_report_names_them(grade, llm_server, tmp_path):  # noqa: F811
    _professional(tmp_path)
    out = grade("--name", "physicians", *grader_args(llm_server), "--physician-responses", "--subset", "pro", "--wait")
    assert "Grading: 6 grader calls on 2 responses" in out
    assert "the physician response of each conversation of pro that has one" in out
    assert "Sampling" not in out
    assert out.rstrip().endswith("Done: physicians")
    run = Run.objects.get(name="physicians")
    assert run.status == Run.Status.DONE
    assert run.physician_responses
    assert run.policy_model == PHYSICIAN_MODEL == "physician"
    assert run.plan == Run.Plan.SUBSET_VERSION
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 6 == run.total_items
    # The graded responses are the rows' own physician responses, verbatim; the row without one is left out.
    assert _physician_responses() == {"pro-1": professional_row()["physician_response"], "pro-2": DR_B}
    assert set(Grade.objects.filter(run=run).values_list("response__source", flat=True)) == {"physician"}
    assert llm_server.calls == 6
    document = run_report_document(run=run)
    assert document["responses"] == {"origin": "physician", "model": "physician"}
    # Scored like a Professional run: with the length adjustment, by the rows' labels.
    assert run.healthbench_professional
    assert document["length_adjustment"] == {"centre": 2000, "penalty_per_500": 0.0147}
    assert document["metrics"]["overall_score:n_samples"] == 2
    assert "overall_score_length_adjusted" in document["metrics"]
    assert document["metrics"]["specialty:general:n_samples"] == 1
    rows = list(csv.reader(io.StringIO(report_csv(document))))
    assert ["responses:origin", "physician", "", ""] in rows
    assert ["responses:model", "physician", "", ""] in rows
    # Graded again (another grader, or the same): still the physicians' responses, and named so.
    grade("--name", "physicians-again", *grader_args(llm_server), "--responses-from", "physicians", "--no-cache")
    again = Run.objects.get(name="physicians-again")
    assert (again.physician_responses, again.policy_model, again.grades.count()) == (True, "physician", 6)
    assert run_report_document(run=again)["responses"] == {"origin": "physician", "model": "physician"}


def test_the_api_grades_the_physicians_responses_and_a_second_grader_grades_the_same_ones(
    llm_server, tmp_path, django_capture_on_commit_callbacks
):
    _professional(tmp_path)
    endpoint_on(llm_server)
    client = _api()
    launch = {"name": "physicians", "grader": "test-grader", "physician_responses": True, "subset": "pro"}
    estimate = client.post("/api/runs/", {**launch, "dry_run": True}, format="json")
    assert estimate.status_code == 200, estimate.json()
    assert estimate.json()["estimate"]["grader_calls"] == 6
    assert estimate.json()["estimate"]["policy_calls"] == 0
    assert not Response.objects.exists()  # an estimate writes nothing
    with django_capture_on_commit_callbacks(execute=True):
        created = client.post("/api/runs/", launch, format="json")
    assert created.status_code == 201, created.json()
    status = client.get("/api/runs/physicians/").json()
    assert status["status"] == "done"
    assert (status["physician_responses"], status["policy_model"], status["policy_endpoint"]) == (
        True,
        "physician",
        "",
    )
    assert status["healthbench_professional"] is True
    assert status["subset"] == "pro"
    assert client.get("/api/runs/physicians/grades/").json()["count"] == 6
    report = client.get("/api/runs/physicians/report/").json()
    assert report["responses"] == {"origin": "physician", "model": "physician"}
    assert report["counts"]["examples_scored"] == 2
    assert report["length_adjustment"] == {"centre": 2000, "penalty_per_500": 0.0147}
    # Another run of the same responses grades the same Response rows (the cache answers it).
    with django_capture_on_commit_callbacks(execute=True):
        again = client.post("/api/runs/", {**launch, "name": "again"}, format="json")
    assert again.status_code == 201, again.json()
    assert Response.objects.count() == 2
    first, second = (
        set(Grade.objects.filter(run__name=name).values_list("response_id", flat=True))
        for name in ("physicians", "again")
    )
    assert first == second
    assert llm_server.calls == 6


def test_a_subset_without_physician_responses_is_refused_saying_why(grade, llm_server, tmp_path):  # noqa: F811
    _import(tmp_path, row("p-1"), row("p-2"), subset="main")
    _import(tmp_path, professional_row("pro-9", physician_response=None), subset="none-written")
    client = _api()
    for subset in ("main", "none-written"):
        with pytest.raises(CommandError, match=f"subset {subset} has no physician responses"):
            grade("--name", "physicians", *grader_args(llm_server), "--physician-responses", "--subset", subset)
        answer = client.post(
            "/api/runs/",
            {"name": "physicians", "grader": "test-grader", "physician_responses": True, "subset": subset},
            format="json",
        )
        assert answer.status_code == 400
        assert "only HealthBench Professional rows carry one" in str(answer.json())
    with pytest.raises(CommandError, match="needs a subset"):
        grade("--name", "physicians", *grader_args(llm_server), "--physician-responses")
    assert not Run.objects.exists()
    assert not Response.objects.exists()
    assert llm_server.calls == 0


def test_the_page_the_api_and_the_command_ask_for_the_same_run(llm_server, tmp_path):
    _professional(tmp_path)
    endpoint_on(llm_server)
    code = str(Subset.objects.get(name="pro").code)
    # The page always sends its hidden samples field: one physician response per conversation all the same.
    fields = {"name": "same", "source": "physician", "subset": code, "grader": "test-grader"}
    page = page_request(**fields, concurrency="16", samples="3", use_cache="on")
    api = api_request(name="same", grader="test-grader", physician_responses=True, subset="pro")
    command = command_request("--name", "same", "--grader", "test-grader", "--physician-responses", "--subset", "pro")
    assert page == api == command
    assert (page.physician_responses, page.subset.name, page.policy, page.samples) == (True, "pro", None, 1)


def test_the_launch_page_launches_it_and_the_run_page_names_the_source(
    llm_server, tmp_path, client, django_capture_on_commit_callbacks
):
    _professional(tmp_path)
    endpoint_on(llm_server)
    client.force_login(person("page", Physician.Role.RESEARCHER))
    form = client.get(reverse("run_new")).content.decode()
    assert "The physicians&#x27; responses (HealthBench Professional rows)" in form
    fields = {
        "name": "physicians",
        "source": "physician",
        "subset": str(Subset.objects.get(name="pro").code),
        "grader": "test-grader",
        "concurrency": "16",
        "samples": "1",
        "use_cache": "on",
    }
    missing = client.post(reverse("run_new"), {**fields, "subset": "", "action": "estimate"})
    assert "Choose the subset whose physicians" in missing.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        launched = client.post(reverse("run_new"), {**fields, "action": "launch"})
    assert launched.status_code == 302, launched.content.decode()[:2000]
    run = Run.objects.get(name="physicians")
    assert run.grades.count() == 6
    page = client.get(reverse("run_detail", args=[run.code])).content.decode()
    assert "· the physicians' responses on pro" in page
    assert "sample per conversation" not in page
    report = client.get(reverse("report_detail", args=[run.code])).content.decode()
    assert "physician (the physicians' responses of the HealthBench Professional rows)" in report
