"""Every reply a provider or gateway can send, over real HTTP against the test server, and how
each run ends: refusals and cut-off answers (policy and grader), exhausted quotas, gateway-
wrapped errors, a streak of identical non-retried failures, redirects, a key echoed in an
error, rate-limit headers, Responses output in several parts, cache writes, reasoning efforts."""

import asyncio
import io
import itertools
import json
import logging
import time

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Physician
from grading.models import Endpoint, Grade, Response, Run, RunBatch, SampleFailure
from grading.pipeline import client as llm
from grading.pipeline.batches import batch_run
from grading.pipeline.client import FailureWatch, RetryPolicy, ask_grader, chat
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.progress import run_progress
from grading.pipeline.provider_errors import UNGRADABLE
from grading.pipeline.rate_limit import LocalRateLimiter
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.reports.report import run_report
from healthbench_web.celery import app
from healthbench_web.log_format import JsonFormatter, TextFormatter
from tests.endpoints import endpoint_on
from tests.grading_data import conversation_with_rubric, imported_run, subset_of
from tests.llm_shapes import REFUSAL
from tests.people import person

pytest_plugins = ["tests.llm_server"]
pytestmark = pytest.mark.django_db

FAST = RetryPolicy(max_attempts=4, format_attempts=3, base_delay=0.02, max_delay=0.1)
MET_PROMPT = "user: hi\n\nassistant: eat a kiwi\n\n[5] Mentions need:kiwi"
NO_LIMIT = LocalRateLimiter()
KEY = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr(llm, "DEFAULT_RETRY", llm.RetryPolicy(base_delay=0.01, max_delay=0.05))


def grade_all(run: Run) -> Run:
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    return run


def launch(grader: Endpoint, source: Run | None = None, **changes) -> Run:
    return run_launch(spec=RunRequest(**{"name": "run", "grader": grader, "responses_from": source, **changes}))


def sampled_run(server, conversations, *, policy_fields=None, **changes) -> Run:
    policy = endpoint_on(server, "policy", model="policy-1", **(policy_fields or {}))
    grader = endpoint_on(server, "grader")
    return launch(grader, subset=subset_of("mine", conversations), policy=policy, samples=1, **changes)


def conversations_saying(*lasts: str):
    """Conversations whose last user turn ends with each of `lasts` (a direction to the policy)."""
    made = []
    for index, last in enumerate(lasts):
        conversation = conversation_with_rubric(index, n_criteria=2)
        conversation.messages[-1]["content"] += f" {last}"
        conversation.save(update_fields=["messages"])
        made.append(conversation)
    return made


def target(server, **changes) -> CallTarget:
    fields = {"base_url": server.url, "model": "grader", "api_key_env": "", "temperature": 0.0}
    fields |= {"max_tokens": 200, "timeout": 2.0, "name": "test"}
    return CallTarget(**(fields | changes))


def run_loop(coroutine):
    async def then_close():
        try:
            return await coroutine
        finally:
            await llm.close_clients()

    return asyncio.run(then_close())


def _researcher(prefix: str):
    return person(f"{prefix}-{next(_people)}", Physician.Role.RESEARCHER)


_people = itertools.count()


def api_client() -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=_researcher("api"))
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def web_client() -> Client:
    client = Client()
    client.force_login(_researcher("web"))
    return client


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("api_style", ["chat", "responses"])
def test_a_policy_refusal_is_stored_as_its_words_graded_and_counted(llm_server, api_style):
    run = sampled_run(
        llm_server, conversations_saying("refuse: now", "", "refuse: again"), policy_fields={"api_style": api_style}
    )
    assert grade_all(run).status == Run.Status.DONE
    refused = Response.objects.filter(run=run, refused=True)
    assert refused.count() == 2
    assert set(refused.values_list("text", flat=True)) == {REFUSAL}
    assert not Response.objects.filter(run=run, text="").exists()
    # Graded as the answer a user would have read, not skipped and not empty.
    assert Grade.objects.filter(response__in=refused, status=Grade.Status.GRADED).count() == 4
    assert run_progress(run=run).refused_samples == 2
    assert run_report(run=run).data["counts"]["refusals"] == 2
    api = api_client().get(f"/api/runs/{run.name}/").json()["progress"]
    assert api["refused_samples"] == 2
    assert "2 refusals by the policy model" in api["sample_notes"]
    page = web_client().get(reverse("run_detail", args=[run.code])).content.decode()
    assert "2 refusals by the policy model, graded as its answer" in page
    report_page = web_client().get(reverse("report_detail", args=[run.code])).content.decode()
    assert '<span class="mark">refused</span>' in report_page


def test_a_grader_refusal_is_a_failed_grade_that_quotes_it(llm_server):
    source = imported_run(conversations=1, samples=1, n_criteria=2, faults={0: "refusal:9"})
    run = grade_all(launch(endpoint_on(llm_server), source))
    failed = Grade.objects.get(run=run, status=Grade.Status.FAILED)
    assert failed.error == f"the grader refused: “{REFUSAL}”"
    assert failed.met is None
    assert failed.attempts == 1  # not asked again: a refusal is an answer
    assert run.status == Run.Status.DONE
    assert "1 of 2 grades failed" in run_progress(run=run).warning


# --- cut-off answers ----------------------------------------------------------------------------


@pytest.mark.parametrize("api_style", ["chat", "responses"])
def test_a_sample_cut_off_at_its_limit_is_stored_marked_and_warned_about(llm_server, api_style):
    conversations = conversations_saying("ramble: on", "")
    run = sampled_run(llm_server, conversations, policy_fields={"api_style": api_style, "max_output_tokens": 50})
    assert grade_all(run).status == Run.Status.DONE
    cut = Response.objects.get(run=run, truncated=True)
    assert cut.output_limit == 50
    assert len(cut.text) == 200
    assert cut.completion_tokens == 50
    assert Response.objects.get(run=run, truncated=False).output_limit is None
    progress = run_progress(run=run)
    assert progress.truncated_samples == 1
    assert progress.sample_notes.startswith("1 sample was cut off at the output limit of 50 tokens")
    assert run_report(run=run).data["counts"]["truncated"] == 1
    assert api_client().get(f"/api/runs/{run.name}/").json()["progress"]["truncated_samples"] == 1
    page = web_client().get(reverse("run_detail", args=[run.code])).content.decode()
    assert "Refused or cut-off samples." in page
    assert "cut off at the output limit of 50 tokens" in page
    transcript = web_client().get(reverse("report_transcript", args=[run.code, cut.code])).content.decode()
    assert "stopped at the output limit of 50 tokens" in transcript


@pytest.mark.django_db(transaction=True)
def test_grade_wait_warns_about_cut_off_samples(llm_server, django_capture_on_commit_callbacks):
    subset_of("mine", conversations_saying("ramble: on"))
    endpoint_on(llm_server, "grader")
    endpoint_on(llm_server, "policy", model="policy-1", max_output_tokens=40)
    out = io.StringIO()
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            call_command(
                "grade",
                "--name",
                "r",
                "--grader",
                "grader",
                "--policy",
                "policy",
                "--samples",
                "1",
                "--subset",
                "mine",
                "--wait",
                stdout=out,
                stderr=out,
            )
    finally:
        app.conf.task_always_eager = False
    assert "warning: 1 sample was cut off at the output limit of 40 tokens" in out.getvalue()
    assert "1 cut off" in out.getvalue()


def test_a_grader_answer_cut_off_is_asked_again_once_with_twice_the_limit(llm_server):
    # About 300 tokens of musing before the verdict: 200 cuts it off, 400 does not.
    outcome = run_loop(ask_grader(target(llm_server), MET_PROMPT + " fault:verbose:99", limiter=NO_LIMIT, policy=FAST))
    assert outcome.met is True
    assert outcome.attempts == 2
    limits = [body["max_tokens"] for _, body in llm_server.requests]
    assert limits == [200, 400]


def test_a_grader_answer_still_cut_off_fails_with_the_limit_it_hit(llm_server):
    source = imported_run(conversations=1, samples=1, n_criteria=1, faults={0: "verbose:99"})
    run = grade_all(launch(endpoint_on(llm_server, max_output_tokens=100), source))
    grade = Grade.objects.get(run=run)
    assert grade.status == Grade.Status.FAILED
    assert grade.error == "the grader's answer was cut off at 200 output tokens"
    assert grade.attempts == 2
    assert llm_server.calls == 2
    assert run.status == Run.Status.FAILED


# --- errors that no retry fixes ------------------------------------------------------------------


def test_an_exhausted_quota_ends_the_run_at_once_though_sent_as_a_429(llm_server):
    source = imported_run(conversations=5, samples=2, n_criteria=5)  # 50 grades
    llm_server.inject("quota", times=1000)
    run = grade_all(launch(endpoint_on(llm_server), source, concurrency=2))
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("grader endpoint test-grader: HTTP 429 from test-grader: You exceeded your current")
    assert llm_server.calls <= 2  # the calls in flight when it came, none after
    assert not Grade.objects.filter(run=run).exists()  # missing, for a resume once paid


def test_a_fatal_answer_fails_the_run_at_once_with_calls_still_in_flight(make_llm_server):
    # The first criterion's answer is fatal; the other calls in flight take 8 s. The run fails
    # (and its other batch is cancelled, unsent) without waiting for them.
    server = make_llm_server(slow_seconds=8.0)
    faults = {0: "quota:99", 1: "slow:99", 2: "slow:99", 3: "slow:99", 4: "slow:99"}
    source = imported_run(conversations=8, samples=2, n_criteria=5, faults=faults)  # 80 grades
    run = launch(endpoint_on(server), source, concurrency=4)
    first, second = run.batches.order_by("number").values_list("id", flat=True)
    started = time.monotonic()
    batch_run(batch_id=first)
    assert time.monotonic() - started < 4.0
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "You exceeded your current quota" in run.error
    batch_run(batch_id=second)
    # The second batch is never claimed, so it sends nothing. (The first round's slow calls may
    # still be reaching the server from abandoned threads, so the count is bounded, not fixed.)
    batch = RunBatch.objects.get(id=second)
    assert (batch.status, batch.claims) == (RunBatch.Status.CANCELLED, 0)
    assert server.calls <= 4  # the first round only


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"model": "gpt-5.4"}, "Unsupported parameter: 'max_tokens' is not supported with this model"),
        ({"model": "gpt-5.4", "api_style": "responses"}, "Unsupported parameter: 'temperature'"),
        ({"model": "missing-model"}, "The model `missing-model` does not exist"),
    ],
    ids=["chat-parameter", "responses-parameter", "unknown-model"],
)
def test_a_gateway_wrapped_fatal_error_ends_the_run_at_once(make_llm_server, fields, words):
    server = make_llm_server(gateway=True)
    source = imported_run(conversations=4, samples=2, n_criteria=5)
    run = grade_all(launch(endpoint_on(server, **fields), source, concurrency=2))
    assert run.status == Run.Status.FAILED
    assert words in run.error
    assert "Received Model Group" not in run.error  # the gateway's tail is dropped
    assert server.calls <= 2


@pytest.mark.parametrize(
    ("dialect", "words"),
    [
        ("azure", "Unsupported parameter: 'max_tokens' is not supported with this model"),
        ("gemini", 'Unknown name "max_tokens": Cannot find field.'),
        ("anthropic", "max_tokens: Extra inputs are not permitted"),
        ("vllm", "Extra inputs are not permitted (max_tokens)"),
        ("openrouter", "HTTP 200 carrying a 400 error from test-grader: Unsupported parameter: 'max_tokens'"),
    ],
)
def test_a_fatal_error_in_each_providers_dialect_ends_the_run_at_once(make_llm_server, dialect, words):
    # A reasoning model sent max_tokens: every call of the run would be refused alike.
    server = make_llm_server(dialect=dialect)
    source = imported_run(conversations=4, samples=2, n_criteria=5)  # 40 grades
    run = grade_all(launch(endpoint_on(server, model="gpt-5.4"), source, concurrency=2))
    assert run.status == Run.Status.FAILED
    assert words in run.error
    assert server.calls <= 2  # the calls in flight when it came, none after
    assert not Grade.objects.filter(run=run).exists()


@pytest.mark.parametrize("dialect", ["azure", "gemini", "anthropic", "vllm", "ollama", "openrouter"])
def test_an_unknown_model_in_each_providers_dialect_ends_the_run_at_once(make_llm_server, dialect):
    server = make_llm_server(dialect=dialect)
    source = imported_run(conversations=2, samples=1, n_criteria=5)
    run = grade_all(launch(endpoint_on(server, model="missing-model"), source, concurrency=2))
    assert run.status == Run.Status.FAILED
    assert "404" in run.error
    assert server.calls <= 2


@pytest.mark.parametrize("kind", ["content_filter", "too_long"])
def test_a_conversation_the_provider_refuses_fails_alone_and_counts_once(llm_server, settings, kind):
    settings.GRADING_FAILURE_STREAK = 3
    faults = dict.fromkeys(range(10), f"{kind}:99")  # every criterion of the first conversation
    source = imported_run(conversations=4, samples=1, n_criteria=10, faults=faults, faulty_conversations=1)
    run = grade_all(launch(endpoint_on(llm_server), source, concurrency=1))
    assert run.status == Run.Status.DONE
    failed = Grade.objects.filter(run=run, status=Grade.Status.FAILED)
    assert failed.count() == 10
    assert {g.response.conversation_id for g in failed} == {source.grades.first().response.conversation_id}
    assert all(g.error.startswith(UNGRADABLE) for g in failed)
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 30
    assert llm_server.calls == 1 + 30  # the conversation's first criterion only, the others unsent
    assert llm_server.faults_served[kind] == 1
    # The run's page names the conversation; a retry leaves its grades alone and says so.
    client = Client()
    client.force_login(person("reader", role=Physician.Role.RESEARCHER))
    page = client.get(reverse("run_detail", args=[run.code])).content.decode()
    assert "Conversations this grader cannot grade" in page
    assert failed.first().response.conversation.prompt_id in page
    retry = client.get(reverse("run_resume", args=[run.code]) + "?retry=1").content.decode()
    assert "10 failed grades not retried: the provider refuses their conversations" in retry
    client.post(reverse("run_retry", args=[run.code]))
    assert Grade.objects.filter(run=run, status=Grade.Status.FAILED).count() == 10


def test_a_content_filter_on_every_conversation_still_stops_the_run_within_the_streak(llm_server, settings):
    settings.GRADING_FAILURE_STREAK = 3
    faults = dict.fromkeys(range(5), "content_filter:99")
    source = imported_run(conversations=6, samples=1, n_criteria=5, faults=faults)
    run = grade_all(launch(endpoint_on(llm_server), source, concurrency=1))
    assert run.status == Run.Status.FAILED
    assert "3 calls in a row failed: cannot be graded on this endpoint: HTTP 400" in run.error
    assert "content filter refused it" in run.error
    assert llm_server.calls == 3  # one per conversation


def test_identical_failures_that_are_not_retried_stop_the_run_within_the_streak(llm_server, settings):
    settings.GRADING_FAILURE_STREAK = 5
    faults = dict.fromkeys(range(5), "too_long:99")
    source = imported_run(conversations=4, samples=2, n_criteria=5, faults=faults)  # 40 grades, each a 400
    run = grade_all(launch(endpoint_on(llm_server), source, concurrency=1))
    assert run.status == Run.Status.FAILED
    assert "5 calls in a row failed: cannot be graded on this endpoint: HTTP 400 from test-grader: This model's" in (
        run.error
    )
    assert llm_server.calls == 5  # one per response: a response's other criteria were not sent


def test_a_policy_rate_limited_for_good_stops_within_the_streak(llm_server, settings):
    settings.GRADING_FAILURE_STREAK = 3
    llm_server.retry_after = 0.01
    llm_server.inject("429", times=10_000)
    run = grade_all(sampled_run(llm_server, conversations_saying(*[""] * 6), concurrency=1))
    assert run.status == Run.Status.FAILED
    assert "3 calls in a row failed: HTTP 429" in run.error
    assert llm_server.calls == 3 * 6  # three samples gave up after their six attempts
    assert not SampleFailure.objects.filter(run=run).count() > 3


# --- redirects -----------------------------------------------------------------------------------


def test_a_redirect_is_a_failed_call_and_nothing_reaches_its_target(make_llm_server):
    elsewhere = make_llm_server()
    redirecting = make_llm_server(redirect_to=elsewhere.url)
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    run = grade_all(launch(endpoint_on(redirecting), source, concurrency=1))
    assert run.status == Run.Status.FAILED
    assert f"the endpoint redirected to {elsewhere.url}/chat/completions" in run.error
    assert "set the base URL to the final address" in run.error
    assert redirecting.calls == 1
    assert elsewhere.calls == 0


def test_a_redirect_to_a_metadata_service_is_not_followed(make_llm_server):
    redirecting = make_llm_server(redirect_to="http://metadata.google.internal/computeMetadata/v1")
    watch = FailureWatch(limit=50)
    outcome = run_loop(ask_grader(target(redirecting), MET_PROMPT, limiter=NO_LIMIT, policy=FAST, watch=watch))
    assert outcome.fatal
    assert outcome.attempts == 1
    assert "redirected to http://metadata.google.internal/computeMetadata/v1/chat/completions" in outcome.error


# --- keys in error text ----------------------------------------------------------------------------


def test_a_key_echoed_in_an_error_is_in_no_stored_field_page_api_answer_or_log_line(
    make_llm_server, settings, monkeypatch, caplog
):
    settings.ENDPOINT_KEY_VARIABLES = ["HB_ECHO_KEY"]
    monkeypatch.setenv("HB_ECHO_KEY", KEY)
    server = make_llm_server(api_key="sk-the-right-one-000000000000", echo_key=True)
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    caplog.set_level(logging.INFO)
    run = grade_all(launch(endpoint_on(server, key_variable="HB_ECHO_KEY"), source))
    assert set(server.authorizations) == {f"Bearer {KEY}"}  # it was sent, and echoed back
    assert run.status == Run.Status.FAILED
    said = "HTTP 401 from test-grader: Incorrect API key provided: Bearer [key removed]."
    assert run.error == f"grader endpoint test-grader: {said}"
    stored = [run.error, *Run.objects.values_list("error", flat=True), *run.batches.values_list("error", flat=True)]
    stored += list(Grade.objects.values_list("error", flat=True))
    shown = [
        web_client().get(reverse("run_detail", args=[run.code])).content.decode(),
        json.dumps(api_client().get(f"/api/runs/{run.name}/").json()),
    ]
    logged = [TextFormatter().format(r) for r in caplog.records] + [JsonFormatter().format(r) for r in caplog.records]
    assert any("Incorrect API key provided" in line for line in logged)
    for text in stored + shown + logged:
        assert KEY not in text
        assert KEY[:20] not in text


def test_a_log_line_never_holds_a_key_whatever_logged_it(settings, monkeypatch):
    settings.ENDPOINT_KEY_VARIABLES = ["HB_ECHO_KEY"]
    monkeypatch.setenv("HB_ECHO_KEY", KEY)
    record = logging.makeLogRecord({"msg": "gateway said: Bearer %s; prefix %s...", "args": (KEY, KEY[:16])})
    for formatter in (TextFormatter(), JsonFormatter()):
        line = formatter.format(record)
        assert KEY[:12] not in line
        assert "Bearer [key removed]; prefix [key removed]..." in line


# --- rate-limit headers, Responses output, usage, efforts --------------------------------------------


def test_without_retry_after_a_429_waits_as_the_rate_limit_headers_say(make_llm_server):
    server = make_llm_server(send_retry_after=False, retry_after=0.4)
    server.inject("429")
    started = time.monotonic()
    reply = run_loop(chat(target(server), [{"role": "user", "content": MET_PROMPT}], limiter=NO_LIMIT, policy=FAST))
    assert reply.attempts == 2
    assert time.monotonic() - started >= 0.4


def test_responses_output_with_reasoning_first_and_text_in_parts_is_read_whole(llm_server):
    point = target(
        llm_server,
        model="gpt-5.4",
        api_style="responses",
        reasoning=True,
        reasoning_effort="low",
        temperature=None,
        structured_output=True,
    )
    outcome = run_loop(ask_grader(point, MET_PROMPT, limiter=NO_LIMIT, policy=FAST))
    assert json.loads(outcome.raw_output) == {"explanation": "The response names it.", "criteria_met": True}


def test_cache_writes_are_stored_with_the_other_usage(make_llm_server):
    server = make_llm_server(cache_min_tokens=128)
    source = imported_run(conversations=2, samples=1, n_criteria=4)
    run = grade_all(launch(endpoint_on(server), source))
    grades = Grade.objects.filter(run=run)
    written = sum(n or 0 for n in grades.values_list("cache_write_tokens", flat=True))
    assert written > 0
    assert grades.filter(cache_write_tokens__gt=0, cached_tokens=0).exists()
    progress = run_progress(run=run)
    assert progress.cache_write_tokens == written
    usage = api_client().get(f"/api/runs/{run.name}/").json()["progress"]["usage"]["grader"]
    assert usage["cache_write_tokens"] == written


@pytest.mark.parametrize(("effort", "tokens"), [("none", 0), ("xhigh", 1024), ("max", 2048)])
def test_every_reasoning_effort_of_the_specification_is_sent(llm_server, effort, tokens):
    point = target(
        llm_server, model="o4-mini", reasoning=True, reasoning_effort=effort, temperature=None, max_tokens=4000
    )
    outcome = run_loop(ask_grader(point, MET_PROMPT, limiter=NO_LIMIT, policy=FAST))
    assert outcome.met is True
    assert outcome.reasoning_tokens == tokens
    assert llm_server.requests[-1][1]["reasoning_effort"] == effort


def test_an_empty_answer_is_a_failed_sample_never_an_empty_response(llm_server, monkeypatch):
    # What a gateway that drops the refusal field sends: no content, no refusal, "stop".
    from tests import llm_server as server_module

    monkeypatch.setattr(server_module, "REFUSAL", "")
    monkeypatch.setattr(server_module, "policy_reply", lambda messages: ("", None))
    run = grade_all(sampled_run(llm_server, conversations_saying("", "")))
    assert not Response.objects.filter(run=run).exists()
    failures = SampleFailure.objects.filter(run=run)
    assert failures.count() == 2
    assert set(failures.values_list("attempts", flat=True)) == {1}
    assert failures.first().error.startswith(
        "the endpoint's answer is empty: the answer holds no text (finish_reason stop)"
    )
    assert run.status == Run.Status.FAILED  # nothing to grade


@pytest.mark.parametrize("effort", ["none", "minimal", "xhigh", "max"])
def test_a_curator_can_choose_every_reasoning_effort_of_the_specification(effort):
    client = Client()
    client.force_login(person(f"curator-{effort}", Physician.Role.CURATOR))
    form = {
        "name": f"r-{effort}",
        "api_style": "chat",
        "model": "o4-mini",
        "key_variable": "OPENAI_API_KEY",
        "reasoning": "on",
        "reasoning_effort": effort,
        "temperature": "0",
        "max_output_tokens": "4096",
        "timeout_seconds": "60",
    }
    response = client.post(reverse("endpoint_new"), form)
    assert response.status_code == 302, response.content.decode()
    assert Endpoint.objects.get(name=f"r-{effort}").reasoning_effort == effort
