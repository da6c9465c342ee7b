"""Grading through a real LiteLLM proxy (the version pinned in requirements-litellm.txt) in
front of the test LLM server, as a team grades with Claude, Gemini or a local model: grades,
usage and cost stored in chat and Responses modes, refusals and cut-off samples marked, and a
fatal error that the gateway wraps in its own ending the run at once.

The proxy runs from .venv-litellm (made by scripts/litellm_venv, which .ci/run calls), listens
on 127.0.0.1 only, with its telemetry and every network look-up off, and with an environment
of its own (no DATABASE_URL or REDIS_URL of ours). Without that virtualenv the tests are
skipped, except in CI, where they fail.
"""

import os
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from grading.models import Grade, Response, Run, SampleFailure
from grading.pipeline import client as llm
from grading.pipeline.batches import batch_run
from grading.pipeline.progress import run_progress
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.reports.report import run_report
from tests.conftest import REPO
from tests.endpoints import endpoint_on
from tests.grading_data import conversation_with_rubric, imported_run, subset_of
from tests.llm_server import LLMServer
from tests.llm_shapes import REFUSAL

pytestmark = pytest.mark.django_db

LITELLM = REPO / ".venv-litellm" / "bin" / "litellm"
MASTER_KEY = "sk-gateway-0123456789abcdefghij"  # what our endpoints send to the proxy
UPSTREAM_KEY = "sk-upstream-9876543210zyxwvutsrq"  # what the proxy sends on
MODELS = ["grader", "gpt-5.4", "policy-1", "reasoning-grader"]
PRICES: dict[str, Any] = {
    "price_input": Decimal("3.00"),
    "price_cached_input": Decimal("0.30"),
    "price_output": Decimal("15.00"),
}


@dataclass
class Gateway:
    url: str
    upstream: LLMServer


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(upstream: LLMServer) -> str:
    models = "".join(
        f"  - model_name: {name}\n    litellm_params:\n      model: openai/{name}\n"
        f"      api_base: {upstream.url}\n      api_key: {UPSTREAM_KEY}\n"
        for name in MODELS
    )
    return (
        f"model_list:\n{models}"
        "litellm_settings:\n  telemetry: false\n  num_retries: 0\n  request_timeout: 30\n"
        "router_settings:\n  num_retries: 0\n"
        f"general_settings:\n  master_key: {MASTER_KEY}\n"
    )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    if not LITELLM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must run the gateway tests: .ci/run makes .venv-litellm with scripts/litellm_venv")
        pytest.skip("no LiteLLM proxy: run scripts/litellm_venv to make .venv-litellm")
    home = tmp_path_factory.mktemp("litellm")
    upstream = LLMServer(cache_min_tokens=128).start()
    config = Path(home, "config.yaml")
    config.write_text(_config(upstream))
    port = _free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        # Its own model price list, not one fetched at start-up; no usage reports sent anywhere.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "DO_NOT_TRACK": "1",
        "NO_DOCS": "True",
        "DISABLE_ADMIN_UI": "True",
        "LITELLM_LOG": "ERROR",
    }
    command = [str(LITELLM), "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    # The proxy writes to its own copy of the file's descriptor; ours can close at once.
    with Path(home, "proxy.log").open("w") as log:
        proxy = subprocess.Popen(command, env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=2):
                break
        except OSError:
            if proxy.poll() is not None or time.monotonic() > deadline:
                proxy.kill()
                upstream.stop()
                pytest.fail(f"the LiteLLM proxy did not start: {Path(home, 'proxy.log').read_text()[-2000:]}")
            time.sleep(0.25)
    yield Gateway(url=f"http://127.0.0.1:{port}/v1", upstream=upstream)
    proxy.terminate()
    try:
        proxy.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proxy.kill()
    upstream.stop()


@pytest.fixture(autouse=True)
def gateway_key(settings, monkeypatch):
    settings.ENDPOINT_KEY_VARIABLES = ["HB_GATEWAY_KEY"]
    monkeypatch.setenv("HB_GATEWAY_KEY", MASTER_KEY)
    monkeypatch.setattr(llm, "DEFAULT_RETRY", llm.RetryPolicy(base_delay=0.01, max_delay=0.05))


def on_gateway(gateway: Gateway, name: str = "via-gateway", **fields):
    class At:
        url = gateway.url

    return endpoint_on(At, name, key_variable="HB_GATEWAY_KEY", **fields)


def grade_all(run: Run) -> Run:
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    return run


def upstream_calls(gateway: Gateway, model: str) -> int:
    return sum(1 for _, body in gateway.upstream.requests if body.get("model") == model)


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "grader"},
        {
            "model": "gpt-5.4",
            "api_style": "responses",
            "reasoning": True,
            "reasoning_effort": "low",
            "structured_output": True,
        },
    ],
    ids=["chat", "responses"],
)
def test_a_run_grades_through_the_gateway_with_usage_and_cost(gateway, fields):
    # Every grader prompt starts with the same instructions, so the first mode's run would leave
    # them cached for the second, whose short conversations then add no whole cache step: forget
    # what the server cached, so that each mode writes prefixes of its own and then reads them.
    with gateway.upstream.lock:
        gateway.upstream.prefixes.clear()
    source = imported_run(conversations=2, samples=2, n_criteria=4, seed=len(fields))
    run = grade_all(
        run_launch(spec=RunRequest(name="gw", grader=on_gateway(gateway, **fields, **PRICES), responses_from=source))
    )
    assert run.status == Run.Status.DONE, run.error
    assert run_report(run=run).data["score"] == run_report(run=source).data["score"]
    grades = Grade.objects.filter(run=run)
    assert grades.filter(status=Grade.Status.GRADED).count() == run.total_items == 16
    assert not grades.filter(prompt_tokens=0).exists()
    assert not grades.filter(completion_tokens=0).exists()
    if fields.get("reasoning"):
        assert set(grades.values_list("reasoning_tokens", flat=True)) == {64}
    assert grades.filter(cached_tokens__gt=0).exists()
    assert grades.filter(cache_write_tokens__gt=0).exists()
    progress = run_progress(run=run)
    expected = (
        Decimal(progress.prompt_tokens - progress.cached_tokens) * 3
        + Decimal(progress.cached_tokens) * Decimal("0.3")
        + Decimal(progress.completion_tokens) * 15
    ) / 1_000_000
    assert progress.cost == expected.quantize(Decimal("0.000001")) > 0
    # Our key stays with the gateway; the provider sees only the gateway's own.
    assert set(gateway.upstream.authorizations) == {f"Bearer {UPSTREAM_KEY}"}


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"model": "reasoning-grader"}, "Unsupported parameter: 'max_tokens' is not supported with this model"),
        ({"model": "reasoning-grader", "api_style": "responses"}, "Unsupported parameter: 'temperature'"),
    ],
    ids=["chat", "responses"],
)
def test_a_fatal_error_the_gateway_wraps_ends_the_run_at_once(gateway, fields, words):
    # A reasoning model set up as an ordinary one: every call is refused, behind LiteLLM's wrapping.
    source = imported_run(conversations=4, samples=2, n_criteria=5)  # 40 grades
    before = upstream_calls(gateway, "reasoning-grader")
    run = run_launch(
        spec=RunRequest(name="gw", grader=on_gateway(gateway, **fields), responses_from=source, concurrency=2)
    )
    run = grade_all(run)
    assert run.status == Run.Status.FAILED, run.error
    assert words in run.error, run.error
    # Chat: LiteLLM's words around the provider's; Responses: the provider's error JSON, read out of them.
    assert run.error.startswith("grader endpoint via-gateway: HTTP 400 from via-gateway: ")
    assert upstream_calls(gateway, "reasoning-grader") - before <= 2
    assert not Grade.objects.filter(run=run).exists()


def test_refusals_and_cut_off_samples_through_the_gateway(gateway):
    conversations = [conversation_with_rubric(i, n_criteria=2) for i in range(3)]
    for conversation, direction in zip(conversations, ["refuse: now", "ramble: on", ""], strict=True):
        conversation.messages[-1]["content"] += f" {direction}"
        conversation.save(update_fields=["messages"])
    grader = on_gateway(gateway, model="grader")
    # Responses: LiteLLM passes refusal parts and incomplete answers on as they are.
    policy = on_gateway(gateway, "policy", model="policy-1", api_style="responses", max_output_tokens=50)
    run = grade_all(
        run_launch(
            spec=RunRequest(name="gw", grader=grader, policy=policy, samples=1, subset=subset_of("mine", conversations))
        )
    )
    assert run.status == Run.Status.DONE, run.error
    samples = Response.objects.filter(run=run)
    assert samples.get(refused=True).text == REFUSAL
    assert samples.get(truncated=True).output_limit == 50
    progress = run_progress(run=run)
    assert (progress.refused_samples, progress.truncated_samples) == (1, 1)
    # Chat Completions: LiteLLM 1.79 drops the refusal field, leaving an empty message. That
    # is a failed sample saying so, never an empty response graded.
    chat_policy = on_gateway(gateway, "policy-chat", model="policy-1")
    run = grade_all(
        run_launch(
            spec=RunRequest(
                name="gw-chat",
                grader=grader,
                policy=chat_policy,
                samples=1,
                subset=subset_of("first", conversations[:1]),
            )
        )
    )
    failure = SampleFailure.objects.get(run=run)
    assert "the answer holds no text" in failure.error
    assert "may have dropped a refusal" in failure.error
    assert not Response.objects.filter(run=run).exists()
