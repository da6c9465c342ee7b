"""API limits and filters: 429 past the launch and token limits, 400 on a filter value that
means nothing, and report documents that match their published schemas."""

import pytest
from django.core.cache import cache
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Physician
from grading.api_serializers import MetaEvalReportSerializer, RunReportSerializer
from grading.models import Endpoint, Run
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.healthbench_rows import consensus_row, row, write
from tests.people import person

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_tasks")]


def _client(username: str, role: str = Physician.Role.RESEARCHER) -> APIClient:
    user = person(username, role)
    # Test databases reuse ids, and throttle counts outlive a test in a shared cache.
    cache.delete_many([f"throttle_run_launch_user-{user.pk}", "throttle_token_127.0.0.1"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def _launch(server, source, name: str, **extra) -> dict:
    if not Endpoint.objects.filter(name="test-grader").exists():
        endpoint_on(server)
    return {"name": name, "grader": "test-grader", "responses_from": source.name, **extra}


# --- throttling -------------------------------------------------------------------------------


def test_run_launches_past_the_limit_are_refused_with_429_and_the_limit_named(settings, llm_server):
    settings.API_RUN_LAUNCH_RATE = "2/hour"
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    client = _client("launcher")
    for name in ("first", "second"):
        assert client.post("/api/runs/", _launch(llm_server, source, name), format="json").status_code == 201
    refused = client.post("/api/runs/", _launch(llm_server, source, "third"), format="json")
    assert refused.status_code == 429
    assert "2/hour" in refused.json()["detail"]
    assert "API_RUN_LAUNCH_RATE" in refused.json()["detail"]
    assert int(refused["Retry-After"]) > 0
    # Estimates start no calls: they stay open, and the limit is per user.
    dry = client.post("/api/runs/", _launch(llm_server, source, "third", dry_run=True), format="json")
    assert dry.status_code == 200
    assert "estimate" in dry.json()
    other = _client("colleague")
    assert other.post("/api/runs/", _launch(llm_server, source, "third"), format="json").status_code == 201


def test_the_run_form_and_the_api_share_one_launch_limit(settings, llm_server, client):
    settings.API_RUN_LAUNCH_RATE = "2/hour"
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    api = _client("both")
    client.force_login(Physician.objects.get(user__username="both").user)

    def form(name: str, action: str = "launch"):
        fields = {
            "name": name,
            "source": "responses",
            "responses_from": source.code,
            "grader": "test-grader",
            "samples": 1,
            "concurrency": 4,
            "use_cache": "on",
            "action": action,
        }
        return client.post("/runs/new/", fields)

    assert api.post("/api/runs/", _launch(llm_server, source, "by-api"), format="json").status_code == 201
    assert form("by-form").status_code == 302
    refused = form("one-too-many")
    assert refused.status_code == 429
    assert "Too many run launches: the limit is 2/hour (API_RUN_LAUNCH_RATE)" in refused.content.decode()
    assert not Run.objects.filter(name="one-too-many").exists()
    assert form("one-too-many", action="estimate").status_code == 200, "an estimate is not a launch"
    assert api.post("/api/runs/", _launch(llm_server, source, "third"), format="json").status_code == 429


def test_token_requests_past_the_limit_are_refused_with_429(settings):
    settings.API_TOKEN_RATE = "3/minute"
    _client("holder")  # also forgets earlier token requests from this address
    answers = [
        APIClient().post("/api/token/", {"username": "holder", "password": "wrong"}).status_code for _ in range(4)
    ]
    assert answers == [400, 400, 400, 429]
    right = APIClient().post("/api/token/", {"username": "holder", "password": "pw-holder"})
    assert right.status_code == 429, "the limit bounds password guessing: a right guess waits too"
    assert "API_TOKEN_RATE" in right.json()["detail"]


def test_a_rate_that_is_not_a_rate_stops_start_up():
    from django.core.exceptions import ImproperlyConfigured

    from healthbench_web.env import env_rate

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("API_RUN_LAUNCH_RATE", "lots")
        with pytest.raises(ImproperlyConfigured, match="API_RUN_LAUNCH_RATE"):
            env_rate("API_RUN_LAUNCH_RATE", "30/hour")
        patch.setenv("API_RUN_LAUNCH_RATE", "5/min")
        assert env_rate("API_RUN_LAUNCH_RATE", "30/hour") == "5/minute"


# --- filters ----------------------------------------------------------------------------------


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1", theme="hedging"), consensus_row("p-2"))
    call_command("import_healthbench", path, subset="picked")
    return imported_run(conversations=2, samples=1, n_criteria=2)


@pytest.mark.parametrize(
    ("url", "parameter"),
    [
        ("/api/conversations/?theme=bogus", "theme"),
        ("/api/conversations/?subset=no-such-subset", "subset"),
        ("/api/criteria/?level=bogus", "level"),
        ("/api/criteria/?axis=bogus", "axis"),
        ("/api/criteria/?cluster=cluster:no_such_cluster", "cluster"),
        ("/api/subset-versions/?subset=no-such-subset", "subset"),
        ("/api/runs/?status=bogus", "status"),
        ("/api/runs/imported/grades/?status=bogus", "status"),
        ("/api/runs/imported/meta-eval/?seed=-1", "seed"),
    ],
)
def test_a_filter_value_that_means_nothing_is_a_400_naming_the_parameter(dataset, url, parameter):
    response = _client("reader").get(url)
    assert response.status_code == 400, response.content
    assert parameter in response.json()


def test_good_filter_values_still_filter(dataset):
    client = _client("reader")
    hedging = client.get("/api/conversations/?theme=hedging").json()["results"]
    assert {c["prompt_id"] for c in hedging} == {"p-1", "conv-0"}
    assert [c["prompt_id"] for c in client.get("/api/conversations/?subset=picked").json()["results"]] == [
        "p-1",
        "p-2",
    ]
    assert client.get("/api/criteria/?level=cluster").json()["count"] > 0
    assert client.get("/api/runs/?status=imported").json()["count"] == 1
    assert client.get("/api/runs/?status=done").json()["count"] == 0
    grades = client.get("/api/runs/imported/grades/?status=graded&prompt_id=conv-0").json()
    assert grades["count"] == 2
    assert {g["prompt_id"] for g in grades["results"]} == {"conv-0"}


def test_the_schema_lists_the_filters_with_their_choices(dataset):
    schema = _client("reader").get("/api/schema/?format=json").json()
    parameters = {p["name"]: p for p in schema["paths"]["/api/runs/"]["get"]["parameters"]}
    assert set(parameters["status"]["schema"]["enum"]) == {
        "pending",
        "running",
        "done",
        "cancelled",
        "failed",
        "imported",
    }
    grades = {p["name"] for p in schema["paths"]["/api/runs/{name}/grades/"]["get"]["parameters"]}
    assert {"status", "prompt_id", "page"} <= grades
    criteria = {p["name"] for p in schema["paths"]["/api/criteria/"]["get"]["parameters"]}
    assert {"conversation", "level", "axis", "cluster"} <= criteria


# --- typed report documents -------------------------------------------------------------------


def test_the_report_and_meta_eval_documents_match_their_schemas(dataset):
    client = _client("reader")
    schema = client.get("/api/schema/?format=json").json()
    for path, name in (("report", "RunReport"), ("meta-eval", "MetaEvalReport")):
        ref = schema["paths"][f"/api/runs/{{name}}/{path}/"]["get"]["responses"]["200"]["content"]
        assert ref["application/json"]["schema"] == {"$ref": f"#/components/schemas/{name}"}
    report = client.get("/api/runs/imported/report/").json()
    checked = RunReportSerializer(data=report)
    assert checked.is_valid(), checked.errors
    # `calibration` is there only when the run has a calibration sample (this one has none).
    optional = {"calibration"}
    assert set(report) == set(RunReportSerializer().fields) - optional, "a field of the report is not in its schema"
    document = client.get("/api/runs/imported/meta-eval/").json()
    meta_checked = MetaEvalReportSerializer(data=document)
    assert meta_checked.is_valid(), meta_checked.errors
    assert set(document) == set(MetaEvalReportSerializer().fields)
