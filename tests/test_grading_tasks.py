"""The grading services, run in-process: batches, faults, idempotence, cache, resume, cancel,
the sweep that recovers dead workers' batches, and sampling."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from annotation.models import Conversation, Subset
from grading.models import Endpoint, Grade, Response, Run, RunBatch, SampleFailure
from grading.pipeline import client as llm
from grading.pipeline.batch_requests import request_key
from grading.pipeline.batches import Outcome, batch_claim, batch_run
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.estimate import RunSpecError, plan_estimate, run_plan
from grading.pipeline.grader_prompt import template_hash
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.pipeline.runs import MAX_BATCH_FAILURES, run_cancel, run_resume, runs_sweep
from grading.reports.report import run_report
from tests.endpoints import endpoint_on
from tests.grading_data import conversation_with_rubric, imported_run, subset_of

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]

# Faults every regrade below meets, each once per item, so every item ends graded:
FAULTS = {0: "500:1", 1: "429:1", 2: "malformed:2", 3: "reset:1", 4: "non_boolean:1"}


@pytest.fixture
def server(llm_server):
    llm_server.retry_after = 0.05
    return llm_server


def grader_on(server) -> Endpoint:
    return Endpoint.objects.filter(name="test-grader").first() or endpoint_on(server)


def spec(server, source=None, **changes) -> RunRequest:
    grader = grader_on(server)
    return RunRequest(**{"name": "again", "grader": grader, "concurrency": 4, "responses_from": source, **changes})


def grade_all(run: Run) -> list[Outcome]:
    return [batch_run(batch_id=batch_id) for batch_id in run.batches.values_list("id", flat=True)]


def test_regrading_an_imported_run_with_an_agreeing_grader_reproduces_its_report_through_faults(server):
    source = imported_run(conversations=5, samples=3, faults=FAULTS)
    run = run_launch(spec=spec(server, source))
    assert run.batches.count() > 1
    assert set(grade_all(run)) == {Outcome.DONE}
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert run.finished is not None
    assert Grade.objects.filter(run=run).count() == Grade.objects.filter(run=source).count() == run.total_items
    assert set(server.faults_served) == {"500", "429", "malformed", "reset", "non_boolean"}
    # The same numbers; only the regrade knows its grader.
    assert run_report(run=run).data | {"grader": None} == run_report(run=source).data


def test_regrading_a_run_brought_in_by_import_run_reproduces_its_report(server, tmp_path):
    from tests import healthbench_rows as rows
    from tests.test_import_run import graded_row, import_dataset, import_run, write_results

    def dataset_row(prompt_id: str, theme: str) -> dict:
        items = [
            rows.rubric_item("Mentions need:kiwi.", 6),
            rows.rubric_item("Mentions need:mango. fault:500:1", 4, "accuracy"),
            rows.rubric_item("Mentions need:papaya, which it should not. fault:malformed:1", -5, "accuracy"),
        ]
        return rows.row(prompt_id, theme=theme, rubrics=items)

    data = [dataset_row("p-1", "hedging"), dataset_row("p-2", "global_health")]
    import_dataset(tmp_path, *data)
    completions = ["Try a kiwi.", "A kiwi and a mango.", "A papaya and a mango.", "Nothing of the sort."]
    examples = [
        graded_row(data[k % 2], [fruit in c for fruit in ("kiwi", "mango", "papaya")], completion=c)
        for k, c in enumerate(completions)
    ]
    import_run(write_results(tmp_path / "healthbench_allresults.json", examples), name="imported")
    source = Run.objects.get(name="imported")
    run = run_launch(spec=spec(server, source))
    grade_all(run)
    assert server.faults_served["500"] == server.faults_served["malformed"] == 4
    # The same numbers; only the regrade knows its grader.
    assert run_report(run=run).data | {"grader": None} == run_report(run=source).data


def test_each_grade_keeps_its_criterion_as_the_source_run_graded_it(server):
    source = imported_run(conversations=2, samples=1)
    run = run_launch(spec=spec(server, source))
    grade_all(run)
    fields = ["response_id", "criterion_id", "position", "criterion_text", "points", "tags"]
    assert list(Grade.objects.filter(run=run).order_by("response", "position").values_list(*fields)) == list(
        Grade.objects.filter(run=source).order_by("response", "position").values_list(*fields)
    )


def test_tokens_and_attempts_are_stored_per_grade(server):
    source = imported_run(conversations=1, samples=1, faults={0: "500:1"})
    run = run_launch(spec=spec(server, source))
    grade_all(run)
    first, second = Grade.objects.filter(run=run).order_by("position")[:2]
    assert (first.attempts, second.attempts) == (2, 1)
    assert (first.prompt_tokens or 0) > 0
    assert (first.completion_tokens or 0) > 0
    assert first.request_key


def test_a_grade_that_keeps_failing_is_recorded_failed_and_the_run_still_finishes(server):
    source = imported_run(conversations=2, samples=1, faults={1: "malformed:9"})
    run = run_launch(spec=spec(server, source))
    grade_all(run)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    failed = Grade.objects.filter(run=run, status=Grade.Status.FAILED)
    assert failed.count() == 2
    assert {(g.met, g.attempts) for g in failed} == {(None, 3)}
    assert failed[0].error.startswith("unreadable answer 3 times")
    assert run_report(run=run).data["counts"]["failed"] == 2


def test_a_batch_delivered_twice_stores_each_grade_once_and_calls_nothing_more(server):
    source = imported_run(conversations=2, samples=2)
    run = run_launch(spec=spec(server, source, concurrency=100))
    (batch_id,) = run.batches.values_list("id", flat=True)
    assert batch_run(batch_id=batch_id) == Outcome.DONE
    calls = server.calls
    assert batch_run(batch_id=batch_id) == Outcome.SKIPPED  # the redelivery finds it done
    RunBatch.objects.filter(id=batch_id).update(status=RunBatch.Status.QUEUED)
    assert batch_run(batch_id=batch_id) == Outcome.DONE
    assert server.calls == calls
    assert Grade.objects.filter(run=run).count() == run.total_items


def test_a_batch_whose_worker_died_is_claimed_again_and_grades_only_what_is_missing(server):
    source = imported_run(conversations=2, samples=2)
    run = run_launch(spec=spec(server, source, concurrency=100, use_cache=False))
    (batch_id,) = run.batches.values_list("id", flat=True)
    batch_run(batch_id=batch_id)
    Grade.objects.filter(run=run, position__gte=3).delete()  # as if the worker died before storing these
    missing = run.total_items - Grade.objects.filter(run=run).count()
    RunBatch.objects.filter(id=batch_id).update(
        status=RunBatch.Status.RUNNING, lease_until=timezone.now() - timedelta(seconds=1)
    )
    server.reset_counts()
    assert batch_run(batch_id=batch_id) == Outcome.DONE
    assert server.calls == missing
    assert Grade.objects.filter(run=run).count() == run.total_items


def test_a_batch_under_a_live_lease_cannot_be_claimed_twice(server):
    run = run_launch(spec=spec(server, imported_run()))
    batch_id = run.batches.values_list("id", flat=True)[0]
    first = batch_claim(batch_id=batch_id)
    assert first is not None
    assert batch_claim(batch_id=batch_id) is None
    RunBatch.objects.filter(id=batch_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    second = batch_claim(batch_id=batch_id)
    assert second is not None
    assert second.token == first.token + 1
    assert first.renew() is False  # the first worker finds out it lost the batch
    assert second.renew() is True


def test_the_run_concurrency_bound_holds(server):
    server.latency = 0.05
    source = imported_run(conversations=3, samples=2)
    run = run_launch(spec=spec(server, source, concurrency=3))
    grade_all(run)
    assert server.max_in_flight == 3


# --- the cache ------------------------------------------------------------------------------


def test_an_identical_request_reuses_the_stored_grade(server):
    source = imported_run(conversations=2, samples=2)
    first = run_launch(spec=spec(server, source, name="first"))
    grade_all(first)
    server.reset_counts()
    second = run_launch(spec=spec(server, source, name="second"))
    grade_all(second)
    assert server.calls == 0
    grades = Grade.objects.filter(run=second)
    assert grades.filter(reused=True).count() == second.total_items
    assert {(g.attempts, g.prompt_tokens) for g in grades} == {(0, 0)}
    assert run_report(run=second).data["metrics"] == run_report(run=first).data["metrics"]


def test_a_run_without_the_cache_calls_the_grader_again(server):
    source = imported_run(conversations=1, samples=2)
    grade_all(run_launch(spec=spec(server, source, name="first")))
    server.reset_counts()
    second = run_launch(spec=spec(server, source, name="second", use_cache=False))
    grade_all(second)
    assert server.calls == second.total_items
    assert not Grade.objects.filter(run=second, reused=True).exists()


def test_the_request_key_changes_with_the_grader_the_template_and_the_prompt():
    point = CallTarget(base_url="http://x/v1", model="g", api_key_env="", temperature=0, max_tokens=9, timeout=1)
    key = request_key(point, "hash", "prompt")
    assert len(key) == 64
    assert request_key(point, "hash", "prompt") == key
    assert request_key(point, "other", "prompt") != key
    assert request_key(point, "hash", "prompt!") != key
    assert request_key(CallTarget(**{**point.__dict__, "model": "h"}), "hash", "prompt") != key
    assert request_key(CallTarget(**{**point.__dict__, "timeout": 5}), "hash", "prompt") == key
    # How it is asked is part of the request too: another API, effort or structured output.
    assert request_key(CallTarget(**{**point.__dict__, "api_style": "responses"}), "hash", "prompt") != key
    assert request_key(CallTarget(**{**point.__dict__, "structured_output": True}), "hash", "prompt") != key
    reasoning = CallTarget(**{**point.__dict__, "reasoning": True, "temperature": None, "reasoning_effort": "low"})
    higher = CallTarget(**{**reasoning.__dict__, "reasoning_effort": "high"})
    assert request_key(reasoning, "hash", "prompt") != request_key(higher, "hash", "prompt")


def test_failed_grades_are_not_reused(server):
    source = imported_run(conversations=1, samples=1, faults={0: "malformed:3"})
    grade_all(run_launch(spec=spec(server, source, name="first")))
    second = run_launch(spec=spec(server, source, name="second"))
    grade_all(second)
    assert Grade.objects.get(run=second, position=0).reused is False


# --- resume, cancel, sweep ----------------------------------------------------------------------


def test_resume_queues_only_the_batches_that_miss_grades(server, django_capture_on_commit_callbacks):
    source = imported_run(conversations=8, samples=2)
    run = run_launch(spec=spec(server, source, concurrency=1))  # 80 grades: 2 batches of 40
    assert run.batches.count() == 2
    grade_all(run)
    last = run.batches.order_by("number").last()
    Grade.objects.filter(run=run, response_id__in=last.response_ids[:1]).delete()
    with django_capture_on_commit_callbacks() as queued:
        assert run_resume(run=run) == 1
    assert len(queued) == 1
    assert run.status == Run.Status.RUNNING
    assert batch_run(batch_id=last.id) == Outcome.DONE
    run.refresh_from_db()
    assert run.status == Run.Status.DONE


def test_resume_with_retry_failed_grades_the_failed_ones_again(server):
    source = imported_run(conversations=1, samples=1, faults={0: "malformed:3"})
    run = run_launch(spec=spec(server, source))
    grade_all(run)
    assert Grade.objects.filter(run=run, status=Grade.Status.FAILED).count() == 1
    assert run_resume(run=run, retry_failed=True) == 1
    grade_all(run)
    assert not Grade.objects.filter(run=run, status=Grade.Status.FAILED).exists()


def test_resuming_a_complete_run_queues_nothing(server):
    run = run_launch(spec=spec(server, imported_run(conversations=1)))
    grade_all(run)
    assert run_resume(run=run) == 0
    run.refresh_from_db()
    assert run.status == Run.Status.DONE


def test_an_imported_run_cannot_be_resumed():
    with pytest.raises(RunSpecError, match="imported"):
        run_resume(run=imported_run(conversations=1))


def test_a_cancelled_run_does_no_more_work(server):
    run = run_launch(spec=spec(server, imported_run(conversations=2)))
    assert run_cancel(run=run) is True
    assert set(grade_all(run)) == {Outcome.SKIPPED}
    assert server.calls == 0
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run_cancel(run=run) is False


@pytest.mark.django_db(transaction=True)
def test_cancelling_stops_a_batch_that_is_being_graded(server):
    server.latency = 0.1
    source = imported_run(conversations=4, samples=4)
    run = run_launch(spec=spec(server, source, concurrency=2))  # 80 items, 40 s at this pace
    batch_id = run.batches.values_list("id", flat=True)[0]

    cancelled_at: list[float] = []

    def cancel_once_grading():
        # Once the first grades are stored (not after a fixed delay: a busy machine may not
        # have stored any by then), so that the cancel lands mid-batch.
        deadline = time.monotonic() + 30
        while not Grade.objects.filter(run=run).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        run_cancel(run=Run.objects.get(id=run.id))
        cancelled_at.append(time.monotonic())
        connection.close()

    threading.Thread(target=cancel_once_grading).start()
    assert batch_run(batch_id=batch_id) == Outcome.STOPPED
    assert time.monotonic() - cancelled_at[0] < 3
    assert 0 < Grade.objects.filter(run=run).count() < run.total_items


def test_the_sweep_queues_again_a_batch_whose_lease_ran_out(server, django_capture_on_commit_callbacks):
    run = run_launch(spec=spec(server, imported_run(conversations=1)))
    batch = run.batches.get()
    batch_claim(batch_id=batch.id)
    assert runs_sweep() == []  # the lease is live
    RunBatch.objects.filter(id=batch.id).update(lease_until=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks() as queued:
        assert runs_sweep() == [batch.id]
    assert len(queued) == 1
    batch.refresh_from_db()
    assert (batch.status, batch.failures) == (RunBatch.Status.QUEUED, 1)


def test_the_sweep_gives_a_batch_up_after_repeated_deaths_and_the_run_ends_failed(server):
    run = run_launch(spec=spec(server, imported_run(conversations=1)))
    batch = run.batches.get()
    RunBatch.objects.filter(id=batch.id).update(
        status=RunBatch.Status.RUNNING,
        failures=MAX_BATCH_FAILURES - 1,
        lease_until=timezone.now() - timedelta(seconds=1),
    )
    assert runs_sweep() == []
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "given up" in run.batches.get().error


def test_the_sweep_sends_again_the_queued_batches_of_a_stalled_run(
    server, settings, django_capture_on_commit_callbacks
):
    run = run_launch(spec=spec(server, imported_run(conversations=1)))
    long_ago = timezone.now() - timedelta(seconds=10 * settings.GRADING_LEASE_SECONDS)
    RunBatch.objects.filter(run=run).update(touched=long_ago)
    with django_capture_on_commit_callbacks() as queued:
        assert len(runs_sweep()) == 1
    assert len(queued) == 1
    assert runs_sweep() == []  # once per stall period


def test_a_missing_api_key_fails_the_run_with_the_reason(server, monkeypatch, settings):
    settings.ENDPOINT_KEY_VARIABLES = ["HB_MISSING_KEY"]
    monkeypatch.delenv("HB_MISSING_KEY", raising=False)
    grader = endpoint_on(server, "keyed", key_variable="HB_MISSING_KEY")
    run = run_launch(spec=spec(server, imported_run(conversations=1), grader=grader))
    assert set(grade_all(run)) <= {Outcome.FAILED, Outcome.SKIPPED}
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "HB_MISSING_KEY" in run.error
    assert server.calls == 0


# --- sampling -----------------------------------------------------------------------------------


def sampled_spec(server, subset, samples=2, **changes) -> RunRequest:
    policy = Endpoint.objects.filter(name="test-policy").first() or endpoint_on(
        server, "test-policy", model="policy-1", temperature=0.7, max_output_tokens=300
    )
    return spec(server, subset=subset, policy=policy, samples=samples, **changes)


def test_a_sampled_run_stores_k_responses_per_conversation_and_grades_them(server):
    conversations = [conversation_with_rubric(i, n_criteria=4) for i in range(3)]
    run = run_launch(spec=sampled_spec(server, subset_of("mine", conversations), samples=2, use_cache=False))
    assert run.total_items == 3 * 2 * 4
    grade_all(run)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    responses = Response.objects.filter(run=run)
    assert sorted(responses.values_list("conversation__prompt_id", "sample_index")) == [
        (f"conv-{i}", k) for i in range(3) for k in range(2)
    ]
    sample = responses.get(conversation=conversations[1], sample_index=1)
    assert sample.source == Response.Source.SAMPLED
    assert sample.model_name == "policy-1"
    assert sample.parameters == {"temperature": 0.7, "max_tokens": 300, "base_url": server.url}
    assert sample.text == "Reply: kiwi mango."
    assert (sample.prompt_tokens or 0) > 0
    assert (sample.completion_tokens or 0) > 0
    assert Grade.objects.filter(run=run).count() == run.total_items
    # The policy said kiwi and mango (conversation 1 asks for two words): those criteria are met.
    met = set(Grade.objects.filter(run=run, response=sample, met=True).values_list("position", flat=True))
    assert met == {0, 1}


def test_a_consensus_subset_is_graded_on_its_cluster_criteria_only(server):
    conversation = conversation_with_rubric(0, n_criteria=4)
    conversation.criteria.filter(position=2).update(level="cluster", tags=["level:cluster", "cluster:test"])
    subset = subset_of("consensus", [conversation], kind=Subset.Kind.CONSENSUS)
    run = run_launch(spec=sampled_spec(server, subset, samples=1))
    grade_all(run)
    assert list(Grade.objects.filter(run=run).values_list("position", "criterion__level")) == [(0, "cluster")]


def test_a_sample_that_cannot_be_drawn_is_stored_with_its_reason_and_drawn_on_resume(server):
    conversations = [conversation_with_rubric(i, n_criteria=2) for i in range(2)]
    run = run_launch(spec=sampled_spec(server, subset_of("mine", conversations), samples=1, concurrency=1))
    server.inject("500", times=llm.DEFAULT_RETRY.max_attempts)  # every attempt of the first sample
    grade_all(run)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert Response.objects.filter(run=run).count() == 1
    assert run.batches.get().failed_samples == 1
    failure = SampleFailure.objects.get(run=run)
    assert failure.error.startswith("HTTP 500 from test-policy: The server had an error (gave up after 6 attempts)")
    assert run_resume(run=run) == 1  # the grades of the failed sample are missing
    grade_all(run)
    assert Response.objects.filter(run=run).count() == 1  # a failed sample stays failed...
    assert run_resume(run=run, retry_failed=True) == 1  # ...until failures are retried
    grade_all(run)
    assert not SampleFailure.objects.filter(run=run).exists()
    assert Grade.objects.filter(run=run).count() == run.total_items


# --- plan and estimate ----------------------------------------------------------------------------


def test_the_estimate_counts_grader_calls_and_tokens(server):
    source = imported_run(conversations=3, samples=2, n_criteria=5)
    the_spec = spec(server, source)
    estimate = plan_estimate(the_spec, run_plan(the_spec))
    assert (estimate.grader_calls, estimate.responses) == (30, 6)
    assert 30 * 400 < estimate.prompt_tokens < 30 * 1000  # the prompt is ~2,000 characters
    assert "30 grader calls on 6 responses" in " ".join(estimate.lines())


def test_the_estimate_of_a_sampled_run_counts_policy_calls(server):
    conversations = [conversation_with_rubric(i, n_criteria=3) for i in range(2)]
    the_spec = sampled_spec(server, subset_of("mine", conversations), samples=4)
    estimate = plan_estimate(the_spec, run_plan(the_spec))
    assert (estimate.policy_calls, estimate.grader_calls, estimate.policy_completion_tokens_max) == (8, 24, 8 * 300)


def test_a_custom_template_is_sent_as_written_and_identified_by_its_hash(server):
    template = "Judge this.\n<<conversation>>\n---\n<<rubric_item>>\nJSON please."
    run = run_launch(spec=spec(server, imported_run(conversations=1, samples=1), template=template))
    grade_all(run)
    assert run.grader_config.prompt_hash == template_hash(template)
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == run.total_items


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"name": ""}, "the run needs a name"),
        ({"concurrency": 0}, "concurrency must be between 1 and 1000"),
        ({"template": "no placeholders"}, "lacks the placeholder"),
        ({"subset": "X"}, "grade either the responses of an existing run"),
        ({"grader": None}, "choose a grader endpoint"),
    ],
)
def test_a_bad_spec_is_refused_with_the_problem(server, changes, problem):
    source = imported_run(conversations=1)
    if changes.get("subset") == "X":
        changes["subset"] = Subset.objects.create(name="x")
    with pytest.raises(RunSpecError, match=problem):
        run_launch(spec=spec(server, source, **changes))
    assert not Run.objects.exclude(id=source.id).exists()


def test_an_empty_source_is_refused(server):
    empty = Run.objects.create(plan=Run.Plan.STORED, name="empty", status=Run.Status.IMPORTED)
    Conversation.objects.create(prompt_id="lonely", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(RunSpecError, match="nothing to grade"):
        run_launch(spec=spec(server, empty))
