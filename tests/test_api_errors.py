"""Every API error is JSON and one the schema declares: a retry or resume while the task queue
is down is a 503 with a sentence and changes nothing (as a launch is), a cancel needs no queue,
a NUL in a body or URL and an unknown address answer JSON, and the schema says which run
fields may be null."""

import json
import socket

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from annotation.models import Physician
from grading.models import Grade, Run, RunBatch
from grading.pipeline import client as llm
from grading.pipeline.batches import batch_run
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from healthbench_web.celery import app as celery_app
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.people import person

pytest_plugins = ["tests.llm_server"]
pytestmark = pytest.mark.django_db


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def api(db) -> Client:
    token = Token.objects.create(user=person("api-researcher", Physician.Role.RESEARCHER)).key
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


@pytest.fixture
def queue_down():
    """The broker is a Redis port where nothing listens (launches check it before writing)."""
    before = (celery_app.conf.broker_url, celery_app.conf.task_always_eager)
    celery_app.conf.broker_url = f"redis://127.0.0.1:{_free_port()}/0"
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.broker_url, celery_app.conf.task_always_eager = before


@pytest.fixture
def ended_run(make_llm_server, monkeypatch) -> Run:
    """A run graded here that failed: its grader refused the key."""
    monkeypatch.setattr(llm, "DEFAULT_RETRY", llm.RetryPolicy(base_delay=0.01, max_delay=0.05))
    server = make_llm_server(api_key="sk-a-key-nobody-has-0000")
    source = imported_run(conversations=2, samples=1, n_criteria=2)
    run = run_launch(spec=RunRequest(name="ended", grader=endpoint_on(server), responses_from=source))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    return run


def _state(run: Run) -> tuple:
    run.refresh_from_db()
    batches = sorted(RunBatch.objects.filter(run=run).values_list("id", "status", "error"))
    return run.status, run.error, batches, Grade.objects.filter(run=run).count()


@pytest.mark.parametrize(
    ("action", "doing"), [("retry", "its failed grades cannot be retried"), ("resume", "it cannot be resumed")]
)
def test_a_retry_or_resume_while_the_queue_is_down_is_a_503_with_a_sentence_and_changes_nothing(
    api, ended_run, queue_down, action, doing
):
    before = _state(ended_run)
    answer = api.post(f"/api/runs/{ended_run.name}/{action}/", {}, content_type="application/json")
    assert answer.status_code == 503
    assert answer["Content-Type"] == "application/json"
    detail = answer.json()["detail"]
    assert detail.startswith(f"ended: {doing} right now, the task queue is unreachable (")
    assert detail.endswith("Nothing was changed; try again once it is back (/healthz/ says what is down).")
    assert _state(ended_run) == before


def test_a_cancel_needs_no_queue(api, queue_down):
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    Run.objects.filter(id=source.id).update(status=Run.Status.RUNNING)
    answer = api.post(f"/api/runs/{source.name}/cancel/")
    assert answer.status_code == 200
    assert answer.json()["status"] == "cancelled"


def test_a_resume_queues_the_batches_that_miss_grades(api, ended_run, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as queued:
        answer = api.post(f"/api/runs/{ended_run.name}/resume/")
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == Run.Status.RUNNING
    assert RunBatch.objects.filter(run=ended_run, status=RunBatch.Status.QUEUED).exists()
    assert queued  # the tasks go to the queue once the transaction commits


def test_only_an_ended_run_is_resumed(api):
    imported = imported_run(conversations=1, samples=1, n_criteria=2)
    answer = api.post(f"/api/runs/{imported.name}/resume/")
    assert answer.status_code == 409
    assert "only an ended run graded here can be resumed" in answer.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [b'{"name": "a\\u0000b", "grader": "g"}', b'{"name": "a\x00b"}'],
    ids=["escaped", "raw"],
)
def test_a_nul_in_a_json_body_is_a_json_400(api, body):
    answer = api.generic("POST", "/api/runs/", body, content_type="application/json")
    assert answer.status_code == 400
    assert answer["Content-Type"] == "application/json"
    assert answer.json() == {"detail": "NUL characters are not allowed in a request body."}


def test_a_nul_in_an_api_url_is_a_json_400(api):
    answer = api.get("/api/runs/", {"status": "a\x00b"})
    assert answer.status_code == 400
    assert answer.json() == {"detail": "NUL bytes are not allowed in a URL."}


def test_a_lone_surrogate_in_a_json_body_is_a_json_400(api):
    answer = api.generic("POST", "/api/subsets/", b'{"name": "\\ud800"}', content_type="application/json")
    assert answer.status_code == 400
    assert "detail" in answer.json()


def test_an_unknown_api_address_is_a_json_404(api):
    answer = api.get("/api/no-such-thing/")
    assert answer.status_code == 404
    assert answer["Content-Type"] == "application/json"
    assert answer.json() == {"detail": "No API operation at /api/no-such-thing/: see /api/schema/."}
    # A page of the site keeps its own 404 page.
    assert Client().get("/no-such-thing/")["Content-Type"].startswith("text/html")


def test_the_schema_says_a_runs_mode_may_be_null_and_an_imported_run_says_null(api):
    schema = api.get("/api/schema/?format=json").json()
    run_fields = schema["components"]["schemas"]["Run"]["properties"]
    for field in ("grading_mode", "explanation_length"):
        assert run_fields[field]["nullable"] is True
    imported = imported_run(conversations=1, samples=1, n_criteria=2)
    answer = api.get(f"/api/runs/{imported.name}/").json()
    assert answer["grading_mode"] is None
    assert answer["explanation_length"] is None


def test_the_schema_declares_the_503s_a_client_meets(api):
    paths = api.get("/api/schema/?format=json").json()["paths"]
    for path in ("/api/runs/{name}/retry/", "/api/runs/{name}/resume/", "/api/runs/"):
        refusal = paths[path]["post"]["responses"]["503"]
        assert "task queue" in refusal["description"]
        assert refusal["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    # Any operation may meet a database outage.
    for path, operations in paths.items():
        for method, operation in operations.items():
            assert "503" in operation["responses"], (path, method)
    assert json.dumps(paths["/api/runs/{name}/cancel/"]["post"]["responses"]["503"]).count("database") == 1


# --- answers about real runs, checked against the schema ---------------------------------------------


@pytest.fixture
def _keep_test_connection():
    # Requests go straight to the WSGI app: keep the test's connection open between them.
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.usefixtures("_keep_test_connection")
def test_answers_about_imported_and_failed_runs_are_ones_the_schema_declares(ended_run, queue_down):
    import schemathesis
    from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

    from healthbench_web.wsgi import application

    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
    imported = ended_run.responses_from
    token = Token.objects.create(user=person("schema-reader", Physician.Role.RESEARCHER)).key
    headers = {"Authorization": f"Token {token}"}
    # 503 is expected here (the queue is down): the checks are that it is declared, and its body.
    checks = [status_code_conformance, response_schema_conformance]
    statuses = []
    for path, method in [
        ("/api/runs/{name}/", "GET"),
        ("/api/runs/{name}/grades/", "GET"),
        ("/api/runs/{name}/report/", "GET"),
        ("/api/runs/{name}/resume/", "POST"),
        ("/api/runs/{name}/retry/", "POST"),
        ("/api/runs/{name}/cancel/", "POST"),
    ]:
        for run in (imported, ended_run):
            operation = schema[path][method]
            parameters = {"name": run.name}
            if path.endswith("/retry/"):  # the one of these that takes a body
                case = operation.Case(path_parameters=parameters, body={}, media_type="application/json")
            else:
                case = operation.Case(path_parameters=parameters)
            statuses.append(case.call_and_validate(headers=headers, checks=checks).status_code)
    assert 503 in statuses  # the ended run's retry and resume, with the queue down
    assert 409 in statuses
    assert statuses.count(200) >= 6
