"""Runs on each kind of endpoint, in-process against the test server: reasoning and
Responses-API graders end to end with usage and cost, and runs that must fail fast and say
why (a closed port, a bad key on the policy endpoint, every grade failing)."""

import socket
import time
from decimal import Decimal
from typing import Any

import pytest

from grading.models import Endpoint, Grade, Response, Run, RunBatch, SampleFailure
from grading.pipeline.batches import Outcome, batch_run
from grading.pipeline.estimate import plan_estimate, run_plan
from grading.pipeline.progress import run_progress
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.reports.report import run_report
from tests.endpoints import endpoint_on
from tests.grading_data import conversation_with_rubric, imported_run, subset_of

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]

PRICES: dict[str, Any] = {
    "price_input": Decimal("2.00"),
    "price_cached_input": Decimal("0.50"),
    "price_output": Decimal("8.00"),
}


def grade_all(run: Run) -> list[Outcome]:
    return [batch_run(batch_id=batch_id) for batch_id in run.batches.values_list("id", flat=True)]


def launch(grader: Endpoint, source: Run | None = None, **changes) -> Run:
    return run_launch(spec=RunRequest(**{"name": "run", "grader": grader, "responses_from": source, **changes}))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    "settings_of",
    [
        {"model": "o4-mini", "reasoning": True, "reasoning_effort": "low"},
        {"model": "gpt-5.4", "reasoning": True, "reasoning_effort": "low", "api_style": "responses"},
        {"model": "grader", "api_style": "responses", "structured_output": True},
    ],
    ids=["reasoning-chat", "reasoning-responses", "responses-structured"],
)
def test_a_run_grades_end_to_end_with_usage_details_and_cost(make_llm_server, settings_of):
    server = make_llm_server(cache_min_tokens=128)
    source = imported_run(conversations=3, samples=2, n_criteria=5)
    grader = endpoint_on(server, **settings_of, **PRICES)
    run = launch(grader, source)
    assert set(grade_all(run)) == {Outcome.DONE}
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert run_report(run=run).data["score"] == run_report(run=source).data["score"]
    grades = Grade.objects.filter(run=run)
    assert grades.count() == run.total_items
    assert not grades.filter(status=Grade.Status.FAILED).exists()
    expected_reasoning = 64 if settings_of.get("reasoning") else 0
    assert set(grades.values_list("reasoning_tokens", flat=True)) == {expected_reasoning}
    # Criteria after a response's first share its long prompt prefix: served from the cache.
    assert grades.filter(cached_tokens__gt=0).count() >= run.total_items // 2
    progress = run_progress(run=run)
    assert progress.cached_tokens == sum(n or 0 for n in grades.values_list("cached_tokens", flat=True))
    expected = (
        Decimal(progress.prompt_tokens - progress.cached_tokens) * 2
        + Decimal(progress.cached_tokens) * Decimal("0.5")
        + Decimal(progress.completion_tokens) * 8
    ) / 1_000_000
    assert progress.cost == expected.quantize(Decimal("0.000001")) > 0
    assert run.grader_config.endpoint == grader
    assert run.grader_config.reasoning == bool(settings_of.get("reasoning"))


def test_a_sampled_run_keeps_the_policys_usage_and_prices_both(make_llm_server):
    server = make_llm_server()
    conversations = [conversation_with_rubric(i, n_criteria=3) for i in range(2)]
    grader = endpoint_on(server, **PRICES)
    policy = endpoint_on(
        server,
        "policy",
        model="policy-reasoning",
        reasoning=True,
        reasoning_effort="medium",
        price_input=1,
        price_output=4,
    )
    run = launch(grader, subset=subset_of("mine", conversations), policy=policy, samples=2)
    grade_all(run)
    samples = Response.objects.filter(run=run)
    assert samples.count() == 4
    assert set(samples.values_list("reasoning_tokens", flat=True)) == {192}
    assert samples.first().parameters == {"reasoning_effort": "medium", "max_tokens": 2048, "base_url": server.url}
    progress = run_progress(run=run)
    assert progress.sample_reasoning_tokens == 4 * 192
    assert progress.sample_cost is not None
    assert progress.grader_cost is not None
    assert progress.cost == progress.grader_cost + progress.sample_cost


def test_without_prices_the_cost_is_unknown_not_zero(llm_server):
    run = launch(endpoint_on(llm_server), imported_run(conversations=1))
    grade_all(run)
    progress = run_progress(run=run)
    assert progress.cost is None
    assert progress.cost_text.startswith("unknown")


def test_a_grader_at_a_closed_port_fails_the_run_in_seconds_with_the_transports_words():
    source = imported_run(conversations=5, samples=2, n_criteria=5)
    grader = Endpoint.objects.create(
        name="closed", base_url=f"http://127.0.0.1:{closed_port()}/v1", model="g", key_variable=""
    )
    run = launch(grader, source, concurrency=1)  # 50 grades: two batches
    started = time.monotonic()
    outcomes = grade_all(run)
    assert time.monotonic() - started < 5
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("grader endpoint closed: connection refused by http://127.0.0.1:")
    assert outcomes[0] is Outcome.FAILED
    assert set(outcomes[1:]) == {Outcome.SKIPPED}
    assert not Grade.objects.filter(run=run).exists()  # missing, for a resume: not "failed" items
    assert not run.batches.filter(status__in=[RunBatch.Status.QUEUED, RunBatch.Status.RUNNING]).exists()


def test_a_policy_endpoint_answering_401_fails_the_run_with_the_reason(make_llm_server, settings, monkeypatch):
    settings.ENDPOINT_KEY_VARIABLES = ["HB_POLICY_KEY"]
    monkeypatch.setenv("HB_POLICY_KEY", "sk-revoked")
    server = make_llm_server(api_key="sk-current")
    conversations = [conversation_with_rubric(i, n_criteria=2) for i in range(3)]
    policy = endpoint_on(server, "policy", model="policy-1", key_variable="HB_POLICY_KEY")
    grader = endpoint_on(make_llm_server())
    run = launch(grader, subset=subset_of("mine", conversations), policy=policy, samples=2)
    grade_all(run)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == "policy endpoint policy: HTTP 401 from policy: Incorrect API key provided."
    assert not SampleFailure.objects.filter(run=run).exists()  # the run's failure, drawn again on resume


def test_a_run_whose_every_grade_failed_ends_failed_not_done(llm_server):
    source = imported_run(conversations=1, samples=1, n_criteria=2, faults={0: "malformed:9", 1: "malformed:9"})
    run = launch(endpoint_on(llm_server), source)
    grade_all(run)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("every grade failed: unreadable answer 3 times")
    assert run.error.endswith("(2×)")


def test_a_run_with_some_failures_ends_done_with_a_warning(llm_server):
    source = imported_run(conversations=2, samples=1, n_criteria=2, faults={1: "malformed:9"})
    run = launch(endpoint_on(llm_server), source)
    grade_all(run)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert run_progress(run=run).warning.startswith("2 of 4 grades failed")


def test_the_estimate_gives_dollars_with_its_caching_assumption(llm_server):
    source = imported_run(conversations=3, samples=2, n_criteria=5)
    spec = RunRequest(name="x", grader=endpoint_on(llm_server, **PRICES), responses_from=source)
    estimate = plan_estimate(spec, run_plan(spec))
    assert estimate.cost is not None
    assert estimate.cost > 0
    text = " ".join(estimate.lines())
    assert "Cost: about $" in text
    assert "prompt cache serves" in text
    unpriced = RunRequest(name="y", grader=endpoint_on(llm_server, "unpriced"), responses_from=source)
    line = plan_estimate(unpriced, run_plan(unpriced)).cost_line()
    assert line.startswith("Cost: unknown — no prices are configured for unpriced")


def test_a_runs_concurrency_stays_within_its_endpoints_limit(llm_server):
    source = imported_run(conversations=1)
    spec = RunRequest(
        name="x", grader=endpoint_on(llm_server, max_concurrency=4), responses_from=source, concurrency=50
    )
    assert "Concurrency capped at 4 by the endpoint's limit." in plan_estimate(spec, run_plan(spec)).lines()
    assert run_launch(spec=spec).concurrency == 4
