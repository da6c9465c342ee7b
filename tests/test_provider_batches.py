"""Batched runs, in-process: requests through the provider's Batch API (the test server's
/v1/files and /v1/batches), polled, mapped back by custom_id, through the live reply rules;
split files, failed and expired lines retried in a new batch or live, a cancel, a lost
create answer, a batch that fails validation, and the batch prices."""

import json
import time
from decimal import Decimal

import pytest

from grading.models import Endpoint, Grade, ProviderBatch, Run, RunBatch
from grading.pipeline.batches import Outcome, batch_run
from grading.pipeline.estimate import RunSpecError, plan_estimate, run_plan
from grading.pipeline.progress import run_progress
from grading.pipeline.provider_batches import provider_batches_cancel
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.pipeline.runs import run_cancel, run_resume
from grading.reports.report import run_report
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]


@pytest.fixture
def server(llm_server, settings):
    settings.GRADING_BATCH_POLL_SECONDS = 0.05
    llm_server.batches.validating_seconds = 0.02
    llm_server.batches.finalizing_seconds = 0.02
    return llm_server


def grader(server, **fields) -> Endpoint:
    values = {
        "batch_discount": Decimal("0.5"),
        "price_input": Decimal("2"),
        "price_cached_input": Decimal("0.5"),
        "price_output": Decimal("8"),
    } | fields
    return Endpoint.objects.filter(name="batcher").first() or endpoint_on(server, "batcher", **values)


def same_scores(run: Run, source: Run) -> bool:
    """The same report, but for the grader, which only the regrade knows."""
    return run_report(run=run).data | {"grader": None} == run_report(run=source).data


def launch(server, source: Run, name: str = "batched", **fields) -> Run:
    return run_launch(spec=RunRequest(name=name, grader=grader(server, **fields), responses_from=source, batch=True))


def step_all(run: Run) -> set[Outcome]:
    """One claim of each open batch of the run."""
    ids = run.batches.filter(status=RunBatch.Status.QUEUED).values_list("id", flat=True)
    return {batch_run(batch_id=batch_id) for batch_id in list(ids)}


def finish(run: Run, timeout: float = 20.0) -> Run:
    """Claim the run's batches until none waits on the provider."""
    deadline = time.monotonic() + timeout
    while True:
        outcomes = step_all(run)
        if Outcome.WAITING not in outcomes:
            run.refresh_from_db()
            return run
        assert time.monotonic() < deadline, list(ProviderBatch.objects.values_list("status", "round", "collected"))
        time.sleep(0.05)


def test_a_batched_regrade_reproduces_the_live_report_through_re_asks(server):
    # An unreadable answer and one cut off are asked again in a second round of batches.
    source = imported_run(conversations=4, samples=2, n_criteria=5, faults={1: "malformed:1", 3: "verbose:1"})
    run = finish(launch(server, source, max_output_tokens=120))
    assert run.status == Run.Status.DONE, run.error
    grades = Grade.objects.filter(run=run)
    assert grades.count() == run.total_items == 40
    assert not grades.filter(status=Grade.Status.FAILED).exists()
    assert not grades.filter(batched=False).exists()
    assert same_scores(run, source)
    rows = ProviderBatch.objects.filter(run=run)
    assert {r.round for r in rows} == {0, 1}
    assert all(r.collected and r.batch_id for r in rows)
    assert set(rows.values_list("status", flat=True)) == {ProviderBatch.Status.COMPLETED}
    assert server.faults_served["malformed"] == 8
    assert server.faults_served["verbose"] == 8
    # The re-asked grades carry both answers' tokens and attempts.
    again = grades.filter(criterion_text__contains="malformed").first()
    assert again is not None
    assert again.attempts == 2
    assert server.calls == 40 + 16  # every request once, and each re-ask once more


def test_requests_past_the_provider_limits_are_split_into_several_batches(server, settings):
    settings.GRADING_BATCH_MAX_REQUESTS = 7
    source = imported_run(conversations=3, samples=2, n_criteria=4)
    run = finish(launch(server, source))
    assert run.status == Run.Status.DONE
    parts = ProviderBatch.objects.filter(run=run)
    assert parts.count() == 4
    assert server.batches.created == 4
    assert sorted(len(p.requests) for p in parts) == [3, 7, 7, 7]
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 24


@pytest.mark.parametrize("retry_live", [False, True])
def test_failed_lines_are_failed_grades_then_retried_as_a_batch_or_live(server, retry_live):
    source = imported_run(conversations=2, samples=2, n_criteria=4, faults={2: "500:1"})
    run = finish(launch(server, source))
    assert run.status == Run.Status.DONE
    failed = Grade.objects.filter(run=run, status=Grade.Status.FAILED)
    assert failed.count() == 4
    assert not failed.filter(met__isnull=False).exists()
    assert all("500" in g.error or "server had an error" in g.error for g in failed)
    assert "4 of 16 grades failed" in run_progress(run=run).warning

    calls = server.calls
    assert run_resume(run=run, retry_failed=True, live=retry_live) == 1
    run = finish(run)
    assert run.status == Run.Status.DONE
    grades = Grade.objects.filter(run=run)
    assert grades.filter(status=Grade.Status.GRADED).count() == 16
    assert same_scores(run, source)
    assert server.calls == calls + 4
    retried = grades.filter(criterion_text__contains="fault:500")
    assert set(retried.values_list("batched", flat=True)) == {not retry_live}
    assert ProviderBatch.objects.filter(run=run).count() == (1 if retry_live else 2)


def test_an_expired_batch_keeps_its_answers_and_fails_the_rest_for_a_retry(server):
    server.batches.expire_after = 5
    source = imported_run(conversations=2, samples=2, n_criteria=4)
    run = finish(launch(server, source))
    row = ProviderBatch.objects.get(run=run)
    assert row.status == ProviderBatch.Status.EXPIRED
    assert (row.completed, row.failed) == (5, 11)
    grades = Grade.objects.filter(run=run)
    assert grades.filter(status=Grade.Status.GRADED).count() == 5
    expired = grades.filter(status=Grade.Status.FAILED)
    assert expired.count() == 11
    assert all("expired" in g.error for g in expired)
    run_resume(run=run, retry_failed=True, live=True)
    assert finish(run).status == Run.Status.DONE
    assert same_scores(run, source)


def test_cancelling_the_run_cancels_the_providers_batch(server):
    server.batches.paused.set()
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    run = launch(server, source)
    assert step_all(run) == {Outcome.WAITING}
    row = ProviderBatch.objects.get(run=run)
    assert row.batch_id
    assert row.status in (ProviderBatch.Status.VALIDATING, ProviderBatch.Status.IN_PROGRESS)
    assert run_cancel(run=run)
    assert provider_batches_cancel(run_id=run.id) == 1
    assert provider_batches_cancel(run_id=run.id) == 0  # asked once
    row.refresh_from_db()
    assert row.cancel_sent is not None
    assert row.status in ("cancelling", "cancelled")
    assert server.batches.cancels == 1
    deadline = time.monotonic() + 5
    while server.batches.batches[row.batch_id].status != "cancelled":
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_create_whose_answer_was_lost_is_found_not_sent_twice(server):
    server.batches.paused.set()
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    run = launch(server, source)
    step_all(run)
    row = ProviderBatch.objects.get(run=run)
    # As if the worker died after sending the create, before storing its answer.
    ProviderBatch.objects.filter(id=row.id).update(batch_id="", status=ProviderBatch.Status.NEW)
    server.batches.paused.clear()
    run = finish(run)
    assert run.status == Run.Status.DONE
    assert server.batches.created == 1
    assert ProviderBatch.objects.get(run=run).batch_id == row.batch_id


def test_a_batch_that_fails_validation_fails_its_grades_with_the_providers_words(server):
    server.batches.fail_validation = "The model `grader` is not available for the Batch API."
    source = imported_run(conversations=1, samples=1, n_criteria=3)
    run = finish(launch(server, source))
    assert run.status == Run.Status.FAILED
    assert "not available for the Batch API" in run.error
    assert Grade.objects.filter(run=run, status=Grade.Status.FAILED).count() == 3


def test_a_batched_run_on_the_responses_api_grades_through_it(server):
    source = imported_run(conversations=2, samples=1, n_criteria=4)
    run = finish(launch(server, source, api_style="responses", structured_output=True))
    assert run.status == Run.Status.DONE
    assert same_scores(run, source)
    assert server.batches.batches[ProviderBatch.objects.get(run=run).batch_id].endpoint == "/v1/responses"


def test_the_estimate_and_the_cost_take_the_batch_discount(server):
    source = imported_run(conversations=2, samples=2, n_criteria=4)
    endpoint = grader(server)
    live = plan_estimate(spec := RunRequest(name="x", grader=endpoint, responses_from=source), run_plan(spec))
    spec = RunRequest(name="y", grader=endpoint, responses_from=source, batch=True)
    batched = plan_estimate(spec, run_plan(spec))
    assert live.grader_cost
    assert batched.grader_cost == (live.grader_cost / 2).quantize(Decimal("0.000001"))
    assert any("Batch API" in line for line in batched.lines())

    run = finish(launch(server, source))
    progress = run_progress(run=run)
    grades = Grade.objects.filter(run=run)
    prompt = sum(g.prompt_tokens or 0 for g in grades)
    cached = sum(g.cached_tokens or 0 for g in grades)
    completion = sum(g.completion_tokens or 0 for g in grades)
    full = (Decimal(prompt - cached) * 2 + Decimal(cached) * Decimal("0.5") + Decimal(completion) * 8) / 1_000_000
    assert progress.grader_cost == (full / 2).quantize(Decimal("0.000001"))
    assert "1 completed" in progress.provider_batch_line
    assert "16 completed" in progress.provider_batch_line


def test_a_batched_run_needs_an_endpoint_with_a_batch_api(server):
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    endpoint = endpoint_on(server, "no-batches")
    with pytest.raises(RunSpecError, match="offers no Batch API"):
        run_launch(spec=RunRequest(name="b", grader=endpoint, responses_from=source, batch=True))


@pytest.mark.django_db(transaction=True)
def test_grade_batch_on_the_command_line_waits_for_the_provider_and_retries_live(
    server, eager_tasks, django_capture_on_commit_callbacks
):
    import io

    from django.core.management import call_command

    source = imported_run(conversations=2, samples=1, n_criteria=3, faults={1: "500:1"})
    grader(server)
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command(
            "grade",
            "--name",
            "cli",
            "--grader",
            "batcher",
            "--responses-from",
            source.name,
            "--batch",
            "--wait",
            stdout=out,
            stderr=out,
        )
    text = out.getvalue()
    assert "Through the provider's Batch API: grading at 50% off" in text
    assert "provider batches: 1 completed; requests 4 completed, 2 failed of 6" in text
    run = Run.objects.get(name="cli")
    assert run.batch
    assert Grade.objects.filter(run=run, status=Grade.Status.FAILED).count() == 2
    with django_capture_on_commit_callbacks(execute=True):
        call_command("grade", "--resume", "cli", "--retry-failed", "--live", "--wait", stdout=out, stderr=out)
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 6
    assert same_scores(run, source)


def test_the_api_launches_a_batched_run_and_shows_its_provider_batches(server, client):
    from annotation.models import Physician
    from tests.people import person

    source = imported_run(conversations=1, samples=1, n_criteria=2)
    grader(server)
    client.force_login(person("rita", Physician.Role.RESEARCHER))
    answer = client.post(
        "/api/runs/",
        {"name": "api-batched", "grader": "batcher", "responses_from": source.name, "batch": True},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    assert answer.json()["batch"] is True
    run = finish(Run.objects.get(name="api-batched"))
    shown = client.get(f"/api/runs/{run.name}/").json()["progress"]["provider_batches"]
    assert shown["by_status"] == {"completed": 1}
    assert shown["batches"][0]["id"].startswith("batch_")
    assert shown["batches"][0]["completed"] == 2
    page = client.get(f"/runs/{run.code}/")
    assert b"Provider batches" in page.content
    assert shown["batches"][0]["id"].encode() in page.content


def test_the_sweep_sends_again_a_waiting_batch_whose_poll_message_was_lost(server, settings):
    from datetime import timedelta

    from django.utils import timezone

    from grading.pipeline.runs import runs_sweep

    server.batches.paused.set()
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    run = launch(server, source)
    assert step_all(run) == {Outcome.WAITING}
    batch = run.batches.get()
    assert batch.status == RunBatch.Status.QUEUED
    assert runs_sweep() == []  # polled a moment ago: its message is on its way
    quiet = settings.GRADING_BATCH_POLL_SECONDS + 4 * settings.GRADING_LEASE_SECONDS + 1
    RunBatch.objects.filter(id=batch.id).update(touched=timezone.now() - timedelta(seconds=quiet))
    assert runs_sweep() == [batch.id]
    assert runs_sweep() == []  # once per quiet period


def per_response(server, source, name: str = "per-response-batched", **fields) -> Run:
    from grading.models import GradingMode

    spec = RunRequest(
        name=name,
        grader=grader(server, **fields),
        responses_from=source,
        batch=True,
        grading_mode=GradingMode.PER_RESPONSE,
    )
    return run_launch(spec=spec)


def test_a_batched_per_response_run_sends_one_line_per_response_and_gives_the_same_report(server):
    from grading.models import GradingMode

    source = imported_run(conversations=4, samples=2, n_criteria=6, faults={2: "malformed:1"}, faulty_conversations=2)
    run = finish(per_response(server, source))
    assert run.status == Run.Status.DONE, run.error
    grades = Grade.objects.filter(run=run)
    assert grades.count() == run.total_items == 48
    assert set(grades.values_list("mode", flat=True)) == {GradingMode.PER_RESPONSE}
    assert not grades.filter(batched=False).exists()
    assert same_scores(run, source)
    # 8 responses, one line each; the 4 unreadable chunk answers asked again in round 2.
    assert server.calls == 8 + 4
    assert sorted(ProviderBatch.objects.filter(run=run).values_list("round", flat=True)) == [0, 1]
    # Each chunk's attempts are counted once, on its first criterion.
    assert sum(g.attempts for g in grades) == 8 + 4


def test_unusable_entries_of_a_batched_chunk_fall_back_to_per_criterion_lines(server):
    from grading.models import GradingMode

    entries = {1: "missing", 2: "duplicate", 4: "non_boolean", 5: "unknown"}
    source = imported_run(conversations=3, samples=2, n_criteria=6, entries=entries, faulty_conversations=2)
    run = finish(per_response(server, source))
    assert run.status == Run.Status.DONE, run.error
    grades = Grade.objects.filter(run=run)
    assert grades.count() == run.total_items == 36
    fallbacks = grades.filter(mode=GradingMode.PER_CRITERION)
    assert fallbacks.count() == 12
    assert set(fallbacks.values_list("position", flat=True)) == {1, 2, 4}
    assert server.calls == 6 + 12
    assert run_progress(run=run).fallbacks == 12
    assert same_scores(run, source)
    rows = ProviderBatch.objects.filter(run=run, round=1).get()
    assert all("#" in custom_id for custom_id in rows.requests)


def test_a_failed_chunk_line_fails_every_criterion_of_it_for_a_retry(server):
    source = imported_run(conversations=2, samples=1, n_criteria=4, faults={0: "500:1"}, faulty_conversations=1)
    run = finish(per_response(server, source))
    failed = Grade.objects.filter(run=run, status=Grade.Status.FAILED)
    assert failed.count() == 4
    assert not failed.filter(met__isnull=False).exists()
    run_resume(run=run, retry_failed=True)
    assert finish(run).status == Run.Status.DONE
    assert same_scores(run, source)


@pytest.mark.parametrize("how", ["batch", "live"])
def test_the_run_page_retries_failed_lines_in_a_new_batch_or_live(server, client, how):
    from annotation.models import Physician
    from tests.people import person

    source = imported_run(conversations=1, samples=1, n_criteria=3, faults={1: "500:1"})
    run = finish(launch(server, source))
    client.force_login(person("rita", Physician.Role.RESEARCHER))
    page = client.get(f"/runs/{run.code}/")
    assert b"Retry the 1 failed in a new provider batch" in page.content
    assert b"Retry them by live calls" in page.content
    answer = client.post(f"/runs/{run.code}/retry/", {"how": how})
    assert answer.status_code == 302
    assert run.batches.get().live is (how == "live")
    run = finish(run)
    assert run.status == Run.Status.DONE
    retried = Grade.objects.get(run=run, criterion_text__contains="fault:500")
    assert retried.status == Grade.Status.GRADED
    assert retried.batched is (how == "batch")


def test_the_api_retries_a_batched_runs_failed_lines_live(server, client):
    from annotation.models import Physician
    from tests.people import person

    source = imported_run(conversations=1, samples=1, n_criteria=3, faults={1: "500:1"})
    run = finish(launch(server, source))
    client.force_login(person("rita", Physician.Role.RESEARCHER))
    answer = client.post(f"/api/runs/{run.name}/retry/", {"live": True}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "running"
    assert finish(run).status == Run.Status.DONE
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 3
    busy = client.post(f"/api/runs/{run.name}/retry/", {}, content_type="application/json")
    assert busy.status_code == 200  # ended again: nothing failed, nothing queued


def test_a_cancel_queues_the_providers_cancel_when_it_commits(server, eager_tasks, django_capture_on_commit_callbacks):
    server.batches.paused.set()
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    run = launch(server, source)
    step_all(run)
    row = ProviderBatch.objects.get(run=run)
    with django_capture_on_commit_callbacks(execute=True):
        assert run_cancel(run=run)
    row.refresh_from_db()
    assert row.cancel_sent is not None
    assert server.batches.cancels == 1
    assert server.batches.batches[row.batch_id].status in ("cancelling", "cancelled")


# Lines as no Batch API sends them; each fails its own item, never the task.
MALFORMED = {
    "a status_code in words": lambda line: line | {"response": line["response"] | {"status_code": "abc"}},
    "a status_code out of range": lambda line: line | {"response": line["response"] | {"status_code": 7}},
    "an error that is a list": lambda line: line | {"response": None, "error": ["x"]},
    "a response that is a list": lambda line: line | {"response": ["x"]},
    "a body that is a list": lambda line: line | {"response": line["response"] | {"body": ["x"]}},
    "an error whose fields are objects": lambda line: line | {"response": None, "error": {"code": {"a": 1}}},
}


def test_malformed_lines_fail_their_items_with_a_reason_never_the_task(server):
    source = imported_run(conversations=2, samples=2, n_criteria=4)
    server.batches.spoilers.extend(MALFORMED.values())
    run = finish(launch(server, source))
    assert run.status == Run.Status.DONE
    failed = Grade.objects.filter(run=run, status=Grade.Status.FAILED)
    assert failed.count() == len(MALFORMED)
    reasons = sorted(failed.values_list("error", flat=True))
    assert sum("is malformed" in reason for reason in reasons) == len(MALFORMED) - 1, reasons
    assert sum("not a completion" in reason for reason in reasons) == 1, reasons
    assert any('its status_code is "abc", not an HTTP status' in reason for reason in reasons)
    assert any("its error is a list, not an object" in reason for reason in reasons)
    # No task failed on them: every batch ended on its first claim.
    assert set(run.batches.values_list("failures", flat=True)) == {0}
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 16 - len(MALFORMED)


def test_each_line_is_the_exact_body_of_the_live_call(server):
    # The README says so: a batched run asks the provider what a live run would.
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    live = finish(
        run_launch(spec=RunRequest(name="live", grader=grader(server), responses_from=source, use_cache=False))
    )
    assert live.status == Run.Status.DONE, live.error
    sent = sorted(json.dumps(body, sort_keys=True) for path, body in server.requests)
    assert len(sent) == 6
    spec = RunRequest(name="batched", grader=grader(server), responses_from=source, batch=True, use_cache=False)
    batched = finish(run_launch(spec=spec))
    assert batched.status == Run.Status.DONE, batched.error
    uploads = [f for f in server.batches.files.values() if f.purpose == "batch"]
    lines = [json.loads(line) for f in uploads for line in f.data.decode().splitlines()]
    assert {line["url"] for line in lines} == {"/v1/chat/completions"}
    assert sorted(json.dumps(line["body"], sort_keys=True) for line in lines) == sent
