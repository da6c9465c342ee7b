"""manage.py grade: estimate, launch, wait, resume, cancel, and bad input. Tasks run eagerly
(in this process) when the launch's transaction commits: at the end of the test's
transaction, or, for the tests that --wait, at once (they commit for real)."""

import io
import time

import pytest
from django.core.management import CommandError, call_command

from grading.models import Endpoint, Grade, GraderConfig, Run, RunBatch
from grading.reports.report import run_report
from tests.endpoints import endpoint_on
from tests.grading_data import conversation_with_rubric, imported_run, subset_of

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_tasks")]


@pytest.fixture
def grade(llm_server, django_capture_on_commit_callbacks):
    """call_command("grade", ...) with the test server as grader; returns its output."""

    def call(*args, **options) -> str:
        out = io.StringIO()
        with django_capture_on_commit_callbacks(execute=True):
            call_command("grade", *args, stdout=out, stderr=out, **options)
        return out.getvalue()

    return call


def grader_args(server, name: str = "test-grader", **fields) -> list[str]:
    if not Endpoint.objects.filter(name=name).exists():
        endpoint_on(server, name, **fields)
    return ["--grader", name]


def policy_args(server) -> list[str]:
    if not Endpoint.objects.filter(name="test-policy").exists():
        endpoint_on(server, "test-policy", model="policy-1")
    return ["--policy", "test-policy"]


@pytest.mark.django_db(transaction=True)
def test_it_prints_an_estimate_then_grades_and_waits_for_the_end(grade, llm_server):
    source = imported_run(name="imported", conversations=3, samples=2, faults={0: "500:1"})
    out = grade("--name", "again", *grader_args(llm_server), "--responses-from", "imported", "--wait")
    assert (
        out.index("Estimate for again:")
        < out.index("Grading: 30 grader calls on 6 responses")
        < out.index("Launched again")
    )
    assert "done      30/30 (100.0%) · 0 failed · 0 reused" in out
    assert out.rstrip().endswith("Done: again")
    run = Run.objects.get(name="again")
    # The same numbers; only the regrade knows its grader.
    assert run_report(run=run).data | {"grader": None} == run_report(run=source).data


def test_estimate_only_launches_nothing(grade, llm_server):
    imported_run(name="imported", conversations=1)
    out = grade("--name", "again", *grader_args(llm_server), "--responses-from", "imported", "--estimate-only")
    assert "grader calls" in out
    assert not Run.objects.filter(name="again").exists()
    assert llm_server.calls == 0


def test_the_grader_settings_are_kept_with_the_run(grade, llm_server, tmp_path):
    imported_run(name="imported", conversations=1, samples=1)
    template = tmp_path / "template.txt"
    template.write_text("Grade it.\n<<conversation>>\n<<rubric_item>>\n")
    endpoint = endpoint_on(
        llm_server,
        "tuned",
        temperature=0.5,
        max_output_tokens=300,
        timeout_seconds=9,
        requests_per_minute=600,
        tokens_per_minute=90000,
    )
    grade(
        "--name",
        "again",
        "--grader",
        "tuned",
        "--responses-from",
        "imported",
        "--grader-template",
        str(template),
        "--concurrency",
        "3",
        "--no-cache",
    )
    # A later edit of the endpoint never changes what the run records it ran with.
    Endpoint.objects.filter(id=endpoint.id).update(temperature=1.0, model="other")
    run = Run.objects.select_related("grader_config").get(name="again")
    config = run.grader_config
    assert (config.model, config.base_url, config.api_key_env, config.endpoint_name) == (
        "grader",
        llm_server.url,
        "",
        "tuned",
    )
    assert (config.temperature, config.max_tokens, config.timeout_seconds) == (0.5, 300, 9.0)
    assert (config.requests_per_minute, config.tokens_per_minute) == (600, 90000)
    # As the page and the API take it: without the file's final newline (grading.pipeline.run_request).
    assert config.prompt_template == template.read_text().strip()
    assert (run.concurrency, run.use_cache, run.status) == (3, False, Run.Status.DONE)


def test_two_runs_with_the_same_grader_share_its_config_and_the_second_reuses_grades(grade, llm_server):
    imported_run(name="imported", conversations=2, samples=1)
    grade("--name", "first", *grader_args(llm_server), "--responses-from", "imported")
    calls = llm_server.calls
    grade("--name", "second", *grader_args(llm_server), "--responses-from", "imported")
    assert GraderConfig.objects.count() == 1
    assert llm_server.calls == calls
    second = Run.objects.get(name="second")
    assert Grade.objects.filter(run=second, reused=True).count() == second.total_items


@pytest.mark.django_db(transaction=True)
def test_it_samples_from_a_policy_model_on_a_subset(grade, llm_server):
    subset_of("mine", [conversation_with_rubric(i, n_criteria=3) for i in range(2)])
    out = grade(
        "--name",
        "sampled",
        *grader_args(llm_server),
        *policy_args(llm_server),
        "--samples",
        "3",
        "--subset",
        "mine",
        "--wait",
    )
    assert "Sampling: 6 policy calls" in out
    assert "Grading: 18 grader calls on 6 responses" in out
    run = Run.objects.get(name="sampled")
    assert run.status == Run.Status.DONE
    assert run.sampled_responses.count() == 6
    assert Grade.objects.filter(run=run).count() == 18
    # The run names the frozen version of the subset it graded.
    assert run.subset_version.subset.name == "mine"
    assert len(run.subset_version.snapshot) == 2


def test_cancel_stops_a_run_and_resume_queues_only_what_is_missing(llm_server, django_capture_on_commit_callbacks):
    imported_run(name="imported", conversations=8, samples=2)  # 80 grades: 2 batches of 40
    out = io.StringIO()
    # Launched, but its tasks never ran (no worker): cancel it.
    call_command(
        "grade",
        "--name",
        "again",
        *grader_args(llm_server),
        "--responses-from",
        "imported",
        "--concurrency",
        "1",
        stdout=out,
    )
    call_command("grade", "--cancel", "again", stdout=out)
    run = Run.objects.get(name="again")
    assert run.status == Run.Status.CANCELLED
    assert set(run.batches.values_list("status", flat=True)) == {RunBatch.Status.CANCELLED}
    with pytest.raises(CommandError, match="is cancelled, not running"):
        call_command("grade", "--cancel", "again", stdout=out)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("grade", "--resume", "again", stdout=out)
    assert "Resumed again: 2 batch(es) queued." in out.getvalue()
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert Grade.objects.filter(run=run).count() == run.total_items
    assert llm_server.calls == run.total_items


@pytest.mark.django_db(transaction=True)
def test_waiting_on_a_run_that_fails_exits_with_its_reason(grade, llm_server, monkeypatch, settings):
    settings.ENDPOINT_KEY_VARIABLES = ["HB_NO_SUCH_KEY"]
    monkeypatch.delenv("HB_NO_SUCH_KEY", raising=False)
    imported_run(name="imported", conversations=1)
    args = grader_args(llm_server, "keyed", key_variable="HB_NO_SUCH_KEY")
    with pytest.raises(CommandError, match="ended failed: endpoint keyed: the environment variable HB_NO_SUCH_KEY"):
        grade("--name", "again", *args, "--responses-from", "imported", "--wait")


@pytest.mark.django_db(transaction=True)
def test_waiting_on_a_grader_at_a_closed_port_exits_non_zero_within_seconds(grade, llm_server):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    imported_run(name="imported", conversations=3)
    Endpoint.objects.create(name="closed", base_url=f"http://127.0.0.1:{port}/v1", model="g", key_variable="")
    started = time.monotonic()
    with pytest.raises(CommandError, match=r"ended failed: grader endpoint closed: connection refused by"):
        grade("--name", "again", "--grader", "closed", "--responses-from", "imported", "--wait")
    assert time.monotonic() - started < 30
    assert Run.objects.get(name="again").status == Run.Status.FAILED


def test_raw_urls_models_and_key_variables_are_refused_with_what_to_do(grade, llm_server):
    imported_run(name="imported", conversations=1)
    for option in ("--grader-base-url", "--grader-api-key-env", "--grader-model", "--policy-api-key-env"):
        with pytest.raises(CommandError, match=f"{option}: Runs do not take a base URL.*name a grader endpoint"):
            grade("--name", "x", option, "SECRET_KEY", "--responses-from", "imported")
    assert Run.objects.count() == 1
    assert llm_server.calls == 0


def test_list_endpoints_names_them(grade, llm_server):
    endpoint_on(llm_server, "pro", model="gpt-5.4", api_style="responses", reasoning=True, reasoning_effort="low")
    assert "pro\tgpt-5.4\tResponses\treasoning, effort low, 2048 output tokens" in grade("--list-endpoints")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--name", "x", "--responses-from", "nope"], "no run named 'nope'"),
        (
            ["--name", "x", "--responses-from", "imported", "--subset", "mine", "--policy", "test-grader"],
            "grade either",
        ),
        (["--name", "x", "--policy", "test-grader", "--samples", "2"], "sampling needs a subset"),
        (["--name", "x", "--subset", "nope", "--policy", "test-grader"], "no subset named 'nope'"),
        (["--name", "x", "--responses-from", "imported", "--policy", "nope"], "no endpoint named 'nope'"),
        (["--name", "imported", "--responses-from", "imported"], "a run named 'imported' already exists"),
        (["--name", "x", "--responses-from", "imported", "--concurrency", "0"], "concurrency must be between"),
        (
            ["--name", "x", "--responses-from", "imported", "--grader-template", "/nowhere"],
            "cannot read the grader template",
        ),
        (["--resume", "nope"], "no run named 'nope'"),
        (["--resume", "imported"], "was imported, not graded here"),
    ],
)
def test_bad_input_exits_non_zero_with_a_message_and_writes_nothing(grade, llm_server, args, message):
    imported_run(name="imported", conversations=1)
    subset_of("mine", [])
    with pytest.raises(CommandError, match=message):
        grade(*args, *grader_args(llm_server))
    assert Run.objects.count() == 1


def test_a_missing_grader_endpoint_is_named(grade):
    imported_run(name="imported", conversations=1)
    with pytest.raises(CommandError, match="--grader ENDPOINT is required"):
        grade("--name", "x", "--responses-from", "imported")


def test_professional_and_length_adjusted_runs_report_adjusted_scores(grade, llm_server):
    imported_run(name="imported", conversations=2, samples=1)
    grade("--name", "pro", *grader_args(llm_server), "--responses-from", "imported", "--professional")
    grade("--name", "adjusted", *grader_args(llm_server), "--responses-from", "imported", "--length-adjusted")
    grade("--name", "plain", *grader_args(llm_server), "--responses-from", "imported")
    pro, adjusted, plain = (Run.objects.get(name=n) for n in ("pro", "adjusted", "plain"))
    assert pro.healthbench_professional
    assert not pro.length_adjusted
    assert adjusted.length_adjusted
    assert "overall_score_length_adjusted" in run_report(run=pro).data["metrics"]
    assert "overall_score_length_adjusted" in run_report(run=adjusted).data["metrics"]
    assert "overall_score_length_adjusted" not in run_report(run=plain).data["metrics"]
