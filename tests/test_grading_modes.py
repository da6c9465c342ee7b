"""Grading modes: a per-response run grades every criterion exactly once, falls back to
per-criterion calls for unusable entries only (and counts them), splits long rubrics, reuses
its own earlier requests, estimates and reports what it does, and gives the report of a
per-criterion run wherever the server's verdicts agree."""

import io
import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Conversation, Physician
from grading.models import Grade, GradingMode, Run
from grading.pipeline.batches import Outcome, batch_run
from grading.pipeline.estimate import RunSpecError, plan_estimate, run_plan, spec_check
from grading.pipeline.modes import per_response
from grading.pipeline.progress import run_progress
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.reports.report import grading_record, run_report, run_report_document
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.people import person

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]

# Faults of whole calls: in a per-response run they meet the chunk's call (the first marker
# that still applies, per call), which is asked again: a 500, then an unreadable answer.
FAULTS = {0: "500:1", 2: "malformed:2"}


@pytest.fixture
def server(llm_server):
    llm_server.retry_after = 0.05
    return llm_server


def spec(server, source, **changes) -> RunRequest:
    grader = endpoint_on(server) if not changes.get("grader") else changes.pop("grader")
    fields = {"name": "per-response", "grader": grader, "concurrency": 4, "responses_from": source}
    return RunRequest(**{**fields, "grading_mode": GradingMode.PER_RESPONSE, **changes})


def grade_all(run: Run) -> list[Outcome]:
    return [batch_run(batch_id=batch_id) for batch_id in run.batches.values_list("id", flat=True)]


def scores(run: Run) -> dict:
    """The report's numbers, without the grader's description (which differs from an imported run's)."""
    data = dict(run_report(run=run).data)
    data.pop("grader", None)
    return data


def once_each(run: Run) -> bool:
    grades = Grade.objects.filter(run=run)
    duplicated = grades.values("response", "position").annotate(n=Count("id")).filter(n__gt=1)
    return grades.count() == run.total_items and not duplicated.exists()


def test_a_per_response_run_makes_one_call_per_response_and_gives_the_same_report(server):
    source = imported_run(conversations=4, samples=2, n_criteria=6)
    run = run_launch(spec=spec(server, source))
    assert set(grade_all(run)) == {Outcome.DONE}
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert once_each(run)
    assert server.calls == 8  # 8 responses, one call each
    assert set(Grade.objects.filter(run=run).values_list("mode", flat=True)) == {GradingMode.PER_RESPONSE}
    assert scores(run) == scores(source)
    progress = run_progress(run=run)
    assert progress.calls == 8
    assert progress.fallbacks == 0
    assert progress.prompt_tokens > 0
    assert progress.completion_tokens > 0


def test_faults_of_the_call_are_retried_for_the_whole_chunk(server):
    source = imported_run(conversations=3, samples=1, n_criteria=5, faults=FAULTS)
    run = run_launch(spec=spec(server, source, grader=endpoint_on(server, structured_output=True)))
    grade_all(run)
    assert once_each(run)
    assert not Grade.objects.filter(run=run, status=Grade.Status.FAILED).exists()
    assert server.faults_served == {"500": 3, "malformed": 3}
    assert scores(run) == scores(source)


def test_unusable_entries_fall_back_to_their_own_calls_and_are_counted(server):
    entries = {1: "missing", 2: "duplicate", 4: "non_boolean", 5: "unknown"}
    source = imported_run(conversations=3, samples=2, n_criteria=6, entries=entries, faulty_conversations=2)
    run = run_launch(spec=spec(server, source))
    grade_all(run)
    assert once_each(run)
    fallbacks = Grade.objects.filter(run=run, mode=GradingMode.PER_CRITERION)
    # Three spoilt entries in each of the 4 responses of the first two conversations (an
    # unknown extra entry spoils nothing).
    assert fallbacks.count() == 12
    assert set(fallbacks.values_list("position", flat=True)) == {1, 2, 4}
    assert server.calls == 6 + 12
    assert run_progress(run=run).fallbacks == 12
    assert run_report_document(run=run)["grading"]["fallbacks"] == 12
    assert scores(run) == scores(source)


def test_a_refused_chunk_fails_its_criteria_which_are_missing_not_unmet(server):
    source = imported_run(conversations=2, samples=1, n_criteria=4, faults={3: "refusal:9"}, faulty_conversations=1)
    run = run_launch(spec=spec(server, source))
    grade_all(run)
    run.refresh_from_db()
    failed = Grade.objects.filter(run=run, status=Grade.Status.FAILED)
    assert run.status == Run.Status.DONE
    assert failed.count() == 4
    assert set(failed.values_list("met", flat=True)) == {None}
    assert run_report(run=run).data["counts"]["failed"] == 4


def test_a_rubric_longer_than_the_limit_is_split_into_even_calls(server, monkeypatch):
    monkeypatch.setattr(per_response, "CRITERIA_PER_CALL", 4)
    source = imported_run(conversations=2, samples=1, n_criteria=9)
    run = run_launch(spec=spec(server, source))
    assert run.grader_config.criteria_per_call == 4
    grade_all(run)
    assert once_each(run)
    assert server.calls == 2 * 3
    assert scores(run) == scores(source)
    attempts = sorted(Grade.objects.filter(run=run).values_list("attempts", flat=True))
    assert sum(attempts) == 6


def test_an_identical_per_response_run_reuses_every_grade_and_a_per_criterion_one_none(server):
    source = imported_run(conversations=2, samples=1, n_criteria=4)
    grade_all(run_launch(spec=spec(server, source)))
    server.reset_counts()
    again = run_launch(spec=spec(server, source, name="again", grader=endpoint_on(server, "same")))
    grade_all(again)
    # Another endpoint name, the same URL, model and settings: the same requests.
    assert server.calls == 0
    assert Grade.objects.filter(run=again, reused=True).count() == again.total_items
    per_criterion = run_launch(
        spec=spec(server, source, name="pc", grader=endpoint_on(server, "pc"), grading_mode=GradingMode.PER_CRITERION)
    )
    grade_all(per_criterion)
    assert server.calls == per_criterion.total_items


def test_the_mode_and_explanation_are_recorded_in_the_grader_snapshot(server):
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    run = run_launch(spec=spec(server, source, explanation_length="words"))
    config = run.grader_config
    assert (config.grading_mode, config.explanation_length) == ("per-response", "words")
    assert config.response_prompt_hash
    assert config.response_template
    plain = run_launch(
        spec=spec(server, source, name="plain", grader=config.endpoint, grading_mode=GradingMode.PER_CRITERION)
    )
    assert plain.grader_config != config
    assert plain.grader_config.grading_mode == "per-criterion"
    assert grading_record(plain) == {"mode": "per-criterion", "prompt_sha256": plain.grader_config.prompt_hash}
    grade_all(run)
    assert "a few words" in server.requests[-1][1]["messages"][0]["content"]


def test_bad_modes_and_explanations_are_refused_with_their_names(server):
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    with pytest.raises(RunSpecError, match="grading mode 'per-call'"):
        spec_check(spec(server, source, grading_mode="per-call"))
    with pytest.raises(RunSpecError, match="explanation length 'essay'"):
        spec_check(spec(server, source, name="b", grader=endpoint_on(server, "b"), explanation_length="essay"))
    with pytest.raises(RunSpecError, match="setting of the per-response mode"):
        spec_check(
            spec(
                server,
                source,
                name="c",
                grader=endpoint_on(server, "c"),
                grading_mode=GradingMode.PER_CRITERION,
                explanation_length="words",
            )
        )


def test_the_estimate_follows_the_mode(server, monkeypatch):
    source = imported_run(conversations=3, samples=2, n_criteria=6)
    grader = endpoint_on(server, price_input=Decimal(2), price_cached_input=Decimal("0.5"), price_output=Decimal(8))
    per_response = spec(server, source, grader=grader)
    per_criterion = spec(server, source, grader=grader, grading_mode=GradingMode.PER_CRITERION)
    pr, pc = (plan_estimate(s, run_plan(s)) for s in (per_response, per_criterion))
    assert (pc.grader_calls, pr.grader_calls) == (36, 6)
    assert pr.prompt_tokens < pc.prompt_tokens / 3
    assert pr.cost is not None
    assert pc.cost is not None
    assert pr.cost < pc.cost
    assert any("Grading per response: 6 grader calls for 36 criteria" in line for line in pr.lines())
    words = plan_estimate(w := spec(server, source, grader=grader, explanation_length="words"), run_plan(w))
    assert words.completion_tokens < pr.completion_tokens


def long_conversations(source: Run, chars: int = 9000) -> None:
    """Conversations long enough that the shared prefix passes the provider's cache minimum."""
    filler = "Background notes from earlier visits, kept for context. " * (chars // 56)
    for conversation in Conversation.objects.filter(responses__grades__run=source).distinct():
        # Each its own from the first word: no prefix shared across conversations.
        own = f"Patient {conversation.prompt_id}. {filler}"
        conversation.messages = [{"role": "user", "content": own}, *conversation.messages]
        conversation.save(update_fields=["messages"])


@pytest.mark.parametrize("mode", [GradingMode.PER_CRITERION, GradingMode.PER_RESPONSE])
def test_the_estimates_cached_share_is_what_the_server_reports(server, monkeypatch, mode):
    monkeypatch.setattr(per_response, "CRITERIA_PER_CALL", 3)  # several calls per response in both modes
    source = imported_run(conversations=3, samples=1, n_criteria=7)
    long_conversations(source)
    run_spec = spec(server, source, grading_mode=mode, concurrency=1)
    estimate = plan_estimate(run_spec, run_plan(run_spec))
    run = run_launch(spec=run_spec)
    grade_all(run)
    progress = run_progress(run=run)
    measured = progress.cached_tokens / progress.prompt_tokens
    assert measured > 0.4
    assert estimate.cached_share == pytest.approx(measured, abs=0.03)
    assert estimate.prompt_tokens == pytest.approx(progress.prompt_tokens, rel=0.05)


# --- the interfaces -------------------------------------------------------------------------


def api_client() -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=person("u-r", Physician.Role.RESEARCHER))
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.mark.usefixtures("eager_tasks")
def test_the_api_launches_a_per_response_run_and_says_its_mode(server, django_capture_on_commit_callbacks):
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    endpoint_on(server)
    client = api_client()
    body = {"name": "pr", "grader": "test-grader", "responses_from": source.name, "grading_mode": "per-response"}
    estimate = client.post("/api/runs/", {**body, "dry_run": True}, format="json").json()["estimate"]
    assert estimate["grader_calls"] == 2
    refused = client.post("/api/runs/", {**body, "grading_mode": "per-call"}, format="json")
    assert refused.status_code == 400
    assert "grading_mode" in refused.json()
    with django_capture_on_commit_callbacks(execute=True):
        created = client.post("/api/runs/", {**body, "explanation_length": "sentences"}, format="json")
    assert created.status_code == 201, created.json()
    run = client.get("/api/runs/pr/").json()
    assert (run["grading_mode"], run["explanation_length"]) == ("per-response", "sentences")
    assert run["progress"]["calls"] == 2
    assert run["progress"]["fallbacks"] == 0
    report = client.get("/api/runs/pr/report/").json()
    assert report["grading"]["mode"] == "per-response"
    assert report["grading"]["explanation_length"] == "sentences"
    grades = client.get("/api/runs/pr/grades/").json()["results"]
    assert {g["mode"] for g in grades} == {"per-response"}


def test_grade_launches_in_the_mode_asked_and_prints_its_estimate(server):
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    endpoint_on(server)
    out = io.StringIO()
    call_command(
        "grade",
        "--name",
        "cli",
        "--grader",
        "test-grader",
        "--responses-from",
        source.name,
        "--grading-mode",
        "per-response",
        "--explanation",
        "words",
        "--estimate-only",
        stdout=out,
    )
    assert "Grading per response: 2 grader calls for 6 criteria" in out.getvalue()
    assert "a few words" in out.getvalue()
    with pytest.raises(CommandError, match="invalid choice: 'per-call'"):
        call_command("grade", "--name", "x", "--grading-mode", "per-call", stderr=io.StringIO())


def test_the_run_form_offers_the_mode_and_the_run_page_counts_fallbacks(server, client):
    source = imported_run(conversations=2, samples=1, n_criteria=3, entries={0: "missing"})
    endpoint_on(server)
    client.force_login(person("r", Physician.Role.RESEARCHER))
    form = client.get("/runs/new/").content.decode()
    assert 'value="per-response"' in form
    assert "Explanation per criterion" in form
    run = run_launch(spec=spec(server, source, grader=None or endpoint_on(server, "g2")))
    grade_all(run)
    page = client.get(f"/runs/{run.code}/").content.decode()
    assert "per-response" in page
    assert "Per-criterion fallbacks" in page
    report = client.get(f"/reports/{run.code}/").content.decode()
    assert "2 per-criterion fallbacks" in report
    csv_text = client.get(f"/reports/{run.code}/report.csv").content.decode()
    assert "grading:mode,per-response" in csv_text
    assert "grading:fallbacks,2" in csv_text
    document = json.loads(client.get(f"/reports/{run.code}/report.json").content)
    assert document["grading"]["fallbacks"] == 2
