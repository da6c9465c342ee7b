"""API: grading runs — create (estimate first), status, cancel, grades and reports, by role."""

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Physician
from grading.models import Endpoint, Run
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.people import person

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_tasks")]


def _client(role: str) -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=person(f"u-{role}", role))
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def source():
    return imported_run(conversations=2, samples=1, n_criteria=3)


def _launch(server, source, **extra) -> dict:
    if not Endpoint.objects.filter(name="test-grader").exists():
        endpoint_on(server)
    return {"name": "regrade", "grader": "test-grader", "responses_from": source.name, **extra}


@pytest.mark.parametrize(
    ("role", "expected"),
    [(Physician.Role.PHYSICIAN, 403), (Physician.Role.RESEARCHER, 200), (Physician.Role.CURATOR, 200)],
)
def test_runs_are_listed_for_researchers_and_curators(source, role, expected):
    response = _client(role).get("/api/runs/")
    assert response.status_code == expected
    if expected == 200:
        assert [r["name"] for r in response.json()["results"]] == [source.name]


def test_a_dry_run_returns_the_estimate_and_launches_nothing(source, llm_server):
    response = _client(Physician.Role.RESEARCHER).post(
        "/api/runs/", _launch(llm_server, source, dry_run=True), format="json"
    )
    assert response.status_code == 200
    estimate = response.json()["estimate"]
    assert estimate["grader_calls"] == source.grades.count()
    assert estimate["total_tokens"] > 0
    assert not Run.objects.filter(name="regrade").exists()


def test_a_researcher_launches_a_run_and_reads_its_status_grades_and_report(
    source, llm_server, django_capture_on_commit_callbacks
):
    client = _client(Physician.Role.RESEARCHER)
    with django_capture_on_commit_callbacks(execute=True):
        created = client.post("/api/runs/", _launch(llm_server, source), format="json")
    assert created.status_code == 201, created.json()
    status = client.get("/api/runs/regrade/").json()
    assert status["status"] == "done"
    assert status["progress"]["remaining"] == 0
    assert status["responses_from"] == source.name
    assert status["grader_model"] == "grader"
    assert status["grader_endpoint"] == "test-grader"
    assert status["progress"]["cost_usd"] is None
    assert status["progress"]["usage"]["grader"]["prompt_tokens"] > 0
    grades = client.get("/api/runs/regrade/grades/").json()
    assert grades["count"] == source.grades.count()
    report = client.get("/api/runs/regrade/report/").json()
    assert "overall_score" in report["metrics"]
    assert report["counts"]["failed"] == 0
    assert client.get("/api/runs/regrade/meta-eval/").status_code == 200


def test_a_bad_launch_lists_every_problem(source, llm_server):
    response = _client(Physician.Role.RESEARCHER).post(
        "/api/runs/",
        _launch(llm_server, source, name=source.name, concurrency=0),
        format="json",
    )
    assert response.status_code == 400
    problems = " ".join(response.json()["non_field_errors"])
    assert "already exists" in problems
    assert "concurrency" in problems


def test_an_unknown_endpoint_is_a_400_naming_the_field(source, llm_server):
    response = _client(Physician.Role.RESEARCHER).post(
        "/api/runs/", _launch(llm_server, source, grader="nope"), format="json"
    )
    assert response.status_code == 400
    assert "grader" in response.json()


def test_researchers_list_endpoints_without_their_urls_or_key_variables(llm_server):
    endpoint_on(
        llm_server, "pro", model="gpt-5.4", reasoning=True, reasoning_effort="low", price_input=1, price_output=2
    )
    researcher = _client(Physician.Role.RESEARCHER)
    listed = researcher.get("/api/endpoints/").json()["results"]
    assert [e["name"] for e in listed] == ["pro"]
    assert listed[0]["reasoning_effort"] == "low"
    assert "base_url" not in listed[0]
    assert "key_variable" not in listed[0]
    assert researcher.post("/api/endpoints/", {"name": "x"}).status_code == 403


def test_physicians_cannot_launch_runs(source, llm_server):
    assert (
        _client(Physician.Role.PHYSICIAN).post("/api/runs/", _launch(llm_server, source), format="json").status_code
        == 403
    )
    assert not Run.objects.filter(name="regrade").exists()


def test_a_finished_run_cannot_be_cancelled(source):
    response = _client(Physician.Role.RESEARCHER).post(f"/api/runs/{source.name}/cancel/")
    assert response.status_code == 409
    assert "nothing to cancel" in response.json()["detail"]


def test_a_running_run_is_cancelled(source):
    Run.objects.filter(pk=source.pk).update(status=Run.Status.RUNNING)
    response = _client(Physician.Role.CURATOR).post(f"/api/runs/{source.name}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"


def test_a_launch_without_a_response_source_is_explained(source, llm_server):
    endpoint_on(llm_server)
    data = {"name": "nothing", "grader": "test-grader"}
    response = _client(Physician.Role.RESEARCHER).post("/api/runs/", data, format="json")
    assert response.status_code == 400
    assert "grade either the responses of an existing run" in " ".join(response.json()["non_field_errors"])


def test_a_nul_character_in_a_json_body_is_a_bad_request(source):
    response = _client(Physician.Role.RESEARCHER).post(
        "/api/runs/",
        '{"name": "x", "grader": "g", "responses_from": "a\\u0000b"}',
        content_type="application/json",
    )
    assert response.status_code == 400


def test_a_nul_character_in_a_form_field_naming_a_subset_is_a_bad_request(source, llm_server):
    data = {**_launch(llm_server, source, subset="mine\x00", policy="test-grader")}
    del data["responses_from"]
    response = _client(Physician.Role.RESEARCHER).post("/api/runs/", data, format="multipart")
    assert response.status_code == 400
    assert "subset" in response.json()


def test_a_run_says_what_it_graded_and_the_rubric_changes_since_can_be_launched(
    source, llm_server, django_capture_on_commit_callbacks
):
    client = _client(Physician.Role.RESEARCHER)
    assert client.get(f"/api/runs/{source.name}/").json()["plan"] == Run.Plan.STORED
    conversation = source.grades.first().response.conversation
    conversation.criteria.create(text="Says when to see a doctor.", points=5, tags=["axis:completeness"], position=99)
    estimate = client.post(
        "/api/runs/", _launch(llm_server, source, name="drift", rubric_changes=True, dry_run=True), format="json"
    ).json()["estimate"]
    # One new criterion on one conversation, for each of its responses.
    assert estimate["grader_calls"] == source.grades.filter(response__conversation=conversation).count() // 3
    with django_capture_on_commit_callbacks(execute=True):
        created = client.post(
            "/api/runs/", _launch(llm_server, source, name="drift", rubric_changes=True), format="json"
        )
    assert created.status_code == 201, created.json()
    status = client.get("/api/runs/drift/").json()
    assert status["plan"] == Run.Plan.RUBRIC_CHANGES
    assert status["total_items"] == status["progress"]["total"] == estimate["grader_calls"]
    alone = _launch(llm_server, source, name="x", rubric_changes=True)
    del alone["responses_from"]
    refused = client.post("/api/runs/", {**alone, "labelled": True}, format="json")
    assert refused.status_code == 400
    assert "the run they changed since" in str(refused.json())
