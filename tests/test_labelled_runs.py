"""A run of the physician-labelled items: `grade --labelled` grades every labelled (response,
consensus criterion) of an imported meta-eval file, with no earlier run, and `meta_eval` then
reports its agreement with the physicians on exactly those items."""

import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Criterion, Physician
from grading.metaeval.importer import meta_eval_import
from grading.models import Endpoint, Grade, Run
from grading.pipeline.estimate import plan_estimate, run_plan
from grading.pipeline.run_request import RunRequest
from grading.plans import labelled_rubric, rubric_drift
from grading.reports.report import run_report
from tests.endpoints import endpoint_on
from tests.metaeval_rows import CATEGORY, OTHER_CATEGORY, lines, meta_row
from tests.people import person

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_tasks")]

ROWS = [
    meta_row("p-1", "c-1", CATEGORY),
    meta_row("p-1", "c-1", OTHER_CATEGORY, labels=(False, False, True), physicians=(0, 1, 2)),
    meta_row("p-1", "c-2", CATEGORY, labels=(True,), physicians=(1,)),
    meta_row("p-2", "c-3", OTHER_CATEGORY, prompt=[{"content": "Is a fever of 39 C serious?", "role": "user"}]),
]


@pytest.fixture
def grade(llm_server, django_capture_on_commit_callbacks):
    def call(*args) -> str:
        if not Endpoint.objects.filter(name="test-grader").exists():
            endpoint_on(llm_server, "test-grader")
        out = io.StringIO()
        with django_capture_on_commit_callbacks(execute=True):
            call_command("grade", *args, "--grader", "test-grader", stdout=out, stderr=out)
        return out.getvalue()

    return call


def test_the_plan_holds_each_labelled_pair_once():
    meta_eval_import(lines=lines(*ROWS))
    rubric = labelled_rubric()
    assert sorted(len(items) for items in rubric.values()) == [1, 1, 2]


def test_the_estimate_counts_the_labelled_pairs(llm_server):
    meta_eval_import(lines=lines(*ROWS))
    spec = RunRequest(name="labelled", grader=endpoint_on(llm_server, "test-grader"), labelled=True)
    plan = run_plan(spec)
    assert plan.grades == 4
    assert plan_estimate(spec, plan).grader_calls == 4


@pytest.mark.django_db(transaction=True)
def test_grade_labelled_then_meta_eval_gives_the_agreement_report(grade, llm_server):
    meta_eval_import(lines=lines(*ROWS))
    out = grade("--name", "labelled", "--labelled", "--wait")
    assert "Grading: 4 grader calls on 3 responses" in out
    assert out.rstrip().endswith("Done: labelled")
    run = Run.objects.get(name="labelled")
    assert run.plan == Run.Plan.LABELLED
    assert run.responses_from is None
    graded = set(Grade.objects.filter(run=run).values_list("response_id", "criterion_id"))
    assert graded == {(int(r), items[0]) for r, plan in run.plan_rubric.items() for items in plan}
    # Every planned grade is there: the report counts none missing.
    assert run_report(run=run).data["counts"]["missing"] == 0
    report = io.StringIO()
    call_command("meta_eval", "labelled", stdout=report)
    document = json.loads(report.getvalue())
    assert document["coverage"]["items"] == 4
    assert document["coverage"]["items_without_grader_label"] == 0
    assert document["coverage"]["labels"] == 8
    assert document["model"]


@pytest.mark.django_db(transaction=True)
def test_per_response_mode_grades_each_response_in_one_call(grade, llm_server):
    meta_eval_import(lines=lines(*ROWS))
    out = grade("--name", "labelled", "--labelled", "--grading-mode", "per-response", "--wait")
    assert "Done: labelled" in out
    assert Grade.objects.filter(run__name="labelled", status=Grade.Status.GRADED).count() == 4
    assert llm_server.calls == 3


def test_without_labels_there_is_nothing_to_grade(grade):
    with pytest.raises(CommandError, match="no response has physician labels"):
        grade("--name", "labelled", "--labelled")


def test_labelled_goes_alone(grade):
    meta_eval_import(lines=lines(*ROWS))
    Run.objects.create(name="other", plan=Run.Plan.STORED, status=Run.Status.IMPORTED, samples=1)
    with pytest.raises(CommandError, match="or the physician-labelled items"):
        grade("--name", "labelled", "--labelled", "--responses-from", "other")


def test_the_meta_eval_page_launches_each_mode_from_a_bare_import(
    client, llm_server, django_capture_on_commit_callbacks
):
    meta_eval_import(lines=lines(*ROWS))
    user = User.objects.create_user("researcher")
    Physician.objects.create(user=user, role=Physician.Role.RESEARCHER)
    client.force_login(user)
    assert "Launch the comparison" in client.get(reverse("metaeval_runs")).content.decode()
    endpoint_on(llm_server, "test-grader")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("graders_comparison_launch"),
            {
                "source": "",
                "grader": "test-grader",
                "modes": ["per-criterion", "per-response"],
                "explanation_length": "sentence",
            },
        )
    assert response.status_code == 302
    launched = list(Run.objects.order_by("id"))
    assert [r.plan for r in launched] == [Run.Plan.LABELLED] * 2
    assert [r.grader_config.grading_mode for r in launched] == ["per-criterion", "per-response"]
    assert all(r.total_items == 4 for r in launched)
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert "per-response" in page.content.decode()


def test_the_api_launches_a_run_of_the_labelled_items(llm_server, django_capture_on_commit_callbacks):
    meta_eval_import(lines=lines(*ROWS))
    endpoint_on(llm_server, "test-grader")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=person('r', 'researcher')).key}")
    body = {"name": "labelled", "grader": "test-grader", "labelled": True}
    estimate = client.post("/api/runs/", body | {"dry_run": True}, format="json")
    assert estimate.status_code == 200
    assert estimate.json()["estimate"]["grader_calls"] == 4
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/runs/", body, format="json")
    assert response.status_code == 201, response.content
    run = Run.objects.get(name="labelled")
    assert run.plan == Run.Plan.LABELLED
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 4


@pytest.mark.django_db(transaction=True)
def test_criteria_of_the_conversation_outside_the_labels_are_no_rubric_change(grade):
    meta_eval_import(lines=lines(*ROWS))
    grade("--name", "labelled", "--labelled", "--wait")
    run = Run.objects.get(name="labelled")
    conversation = Grade.objects.filter(run=run).first().response.conversation
    # A consensus criterion attached to the conversation that no physician labelled.
    Criterion.objects.create(
        conversation=conversation,
        text="Says when to see a doctor.",
        points=5,
        position=99,
        level=Criterion.Level.CLUSTER,
        tags=["level:cluster", "cluster:unlabelled"],
    )
    assert not rubric_drift(run).moved
    assert run_report(run=run).data["counts"]["missing"] == 0
