"""The researcher's job from the command line: endpoint add (the curator form's rules), list and
check (one real call); grade --list-endpoints; grade --resume checked like a launch; every
command on an unmigrated database says "run migrate first"."""

import json
import os
import subprocess
import sys
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from grading.endpoints import check
from grading.models import Endpoint, GraderConfig, Run
from grading.pipeline.batches import batch_run
from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE, conversation_block, render, rubric_item
from grading.pipeline.grader_templates import grader_template_save
from tests.grading_data import imported_run

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]

REPO = Path(__file__).resolve().parent.parent


def run_command(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_add_saves_a_preset_through_the_curator_forms_rules(llm_server):
    said, _ = run_command(
        "endpoint", "add", "grader", "--preset", "original", "--base-url", llm_server.url, "--key-variable", ""
    )
    grader = Endpoint.objects.get(name="grader")
    assert (grader.model, grader.temperature, grader.max_output_tokens) == ("gpt-4.1-2025-04-14", 0.5, 2048)
    assert grader.system_message == "You are a helpful assistant."
    assert "the reference grader request" in said
    run_command("endpoint", "add", "pro", "--preset", "professional", "--model", "gpt-5.4", "--json-schema")
    pro = Endpoint.objects.get(name="pro")
    assert (pro.api_style, pro.reasoning_effort, pro.structured_output) == ("responses", "low", True)
    assert pro.key_variable == "OPENAI_API_KEY"


def test_add_takes_every_option_of_the_endpoints_page(llm_server):
    run_command(
        "endpoint", "add", "local", "--preset", "original", "--base-url", llm_server.url, "--key-variable", "",
        "--api-style", "responses", "--model", "gpt-oss-20b", "--reasoning", "--reasoning-effort", "high",
        "--system-message", "", "--timeout", "90", "--price-input", "0.1", "--price-cached-input", "0.05",
        "--price-output", "0.4", "--rpm", "600", "--tpm", "90000", "--concurrency", "8",
    )  # fmt: skip
    local = Endpoint.objects.get(name="local")
    assert (local.api_style, local.model, local.reasoning, local.reasoning_effort) == (
        "responses",
        "gpt-oss-20b",
        True,
        "high",
    )
    assert local.temperature is None  # a reasoning model gets none, though the preset has 0.5
    assert local.system_message == ""
    assert (local.timeout_seconds, local.requests_per_minute, local.tokens_per_minute) == (90.0, 600, 90000)
    assert local.max_concurrency == 8
    assert (local.price_input, local.price_cached_input, local.price_output) == (
        Decimal("0.1"),
        Decimal("0.05"),
        Decimal("0.4"),
    )


def test_the_batch_discount_stays_only_with_a_provider_that_has_a_batch_api(llm_server):
    run_command("endpoint", "add", "openai", "--preset", "original")
    run_command(
        "endpoint", "add", "azure", "--preset", "original", "--base-url", "https://x.openai.azure.com/openai/v1"
    )
    run_command("endpoint", "add", "ollama", "--preset", "original", "--base-url", llm_server.url)
    run_command(
        "endpoint", "add", "vllm", "--preset", "original", "--base-url", llm_server.url, "--batch-discount", "0.3"
    )
    run_command("endpoint", "add", "plain", "--preset", "original", "--no-batch")
    discounts = dict(Endpoint.objects.values_list("name", "batch_discount"))
    assert discounts == {
        "openai": Decimal("0.5"),
        "azure": Decimal("0.5"),
        "ollama": None,
        "vllm": Decimal("0.3"),
        "plain": None,
    }
    _, warned = run_command(
        "endpoint", "add", "vllm2", "--preset", "original", "--base-url", llm_server.url, "--batch-discount", "0.5"
    )
    assert "not OpenAI's or Azure OpenAI's, the providers with a Batch API" in warned
    with pytest.raises(CommandError, match="not allowed with argument"):
        run_command("endpoint", "add", "both", "--preset", "original", "--no-batch", "--batch-discount", "0.5")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--key-variable", "SECRET_KEY"], "--key-variable: Select a valid choice"),
        (["--base-url", "http://169.254.169.254/v1"], "--base-url: "),
        (["--temperature", "0.3"], "--temperature: Reasoning models take no temperature"),
    ],
)
def test_add_refuses_what_the_form_refuses_and_stores_nothing(args, message):
    with pytest.raises(CommandError, match=message):
        run_command("endpoint", "add", "bad", "--preset", "professional", *args)
    assert not Endpoint.objects.exists()


def test_add_refuses_a_taken_name():
    run_command("endpoint", "add", "grader", "--preset", "original")
    with pytest.raises(CommandError, match="already exists"):
        run_command("endpoint", "add", "grader", "--preset", "professional")


def test_list_says_when_there_are_none_and_grade_lists_the_same(llm_server):
    assert run_command("endpoint", "list")[0].startswith("no endpoints yet")
    assert run_command("grade", "--list-endpoints")[0].startswith("no endpoints yet")
    run_command("endpoint", "add", "grader", "--preset", "original", "--temperature", "0")
    listed = run_command("endpoint", "list")[0]
    assert listed.startswith("grader\tgpt-4.1-2025-04-14\tChat Completions\ttemperature 0, 2048 output tokens")
    assert "differs from the reference (temperature 0 (the reference: 0.5))" in listed
    assert run_command("grade", "--list-endpoints")[0] == listed


def add_on(server, name: str, **options) -> Endpoint:
    args = ["endpoint", "add", name, "--preset", options.pop("preset", "original"), "--base-url", server.url]
    for option, value in options.items():
        args += [f"--{option.replace('_', '-')}", value]
    run_command(*args)
    return Endpoint.objects.get(name=name)


def test_check_makes_one_real_call_and_says_what_works(make_llm_server, monkeypatch):
    server = make_llm_server(api_key="sk-right")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-right")
    add_on(server, "grader")
    said, _ = run_command("endpoint", "check", "grader")
    assert "key: accepted (OPENAI_API_KEY)" in said
    assert "model: gpt-4.1-2025-04-14 answered" in said
    assert "request shape: accepted (/chat/completions; max_tokens, temperature)" in said
    assert "verdict: not met, read as a run reads it" in said
    assert said.rstrip().endswith("grader works.")
    assert server.calls == 1
    said, _ = run_command("endpoint", "check", "grader", "--grading-mode", "per-response")
    assert "verdict: not met, read as a run reads it" in said
    assert server.calls == 2


def test_check_sends_the_prompt_a_run_would_send(llm_server):
    # The built-in grader prompt, or a stored template, filled as a run fills it: the check
    # proves the endpoint answers the question a run will ask, not one of its own.
    add_on(llm_server, "grader", key_variable="")
    run_command("endpoint", "check", "grader")
    conversation = conversation_block(check.MESSAGES, check.RESPONSE)
    item = rubric_item(check.CRITERION, check.POINTS)
    path, body = llm_server.requests[-1]
    assert body["messages"][-1]["content"] == render(DEFAULT_TEMPLATE, conversation=conversation, item=item)
    text = "Judge this.\n<<conversation>>\n---\n<<rubric_item>>\nAnswer in JSON with criteria_met."
    grader_template_save(name="house", text=text)
    run_command("endpoint", "check", "grader", "--template", "house")
    path, body = llm_server.requests[-1]
    assert path.endswith("/chat/completions")
    assert body["messages"][-1]["content"] == render(text, conversation=conversation, item=item)
    with pytest.raises(CommandError, match=r"no grader template named 'nope' \(stored: house;"):
        run_command("endpoint", "check", "grader", "--template", "nope")
    with pytest.raises(CommandError, match="per-response grading has its own prompt"):
        run_command("endpoint", "check", "grader", "--template", "house", "--grading-mode", "per-response")
    assert llm_server.calls == 2


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("refusal", "the grader refused"),
        ("malformed", "without a verdict a run could read"),
        ("non_boolean", 'criteria_met is "yes", not a JSON boolean'),
        ("verbose", "cut off at 40 output tokens before its verdict"),
    ],
)
def test_check_says_works_only_for_an_answer_with_a_verdict(llm_server, fault, words):
    grader = add_on(llm_server, "grader", key_variable="", max_output_tokens="40")
    assert grader.max_output_tokens == 40
    llm_server.inject(fault)
    err = StringIO()
    with pytest.raises(CommandError, match="does not work yet"):
        call_command("endpoint", "check", "grader", stdout=StringIO(), stderr=err)
    assert words in err.getvalue()


@pytest.mark.parametrize(
    ("dialect", "words"),
    [
        ("gemini", "the request's shape was refused: HTTP 400 from grader: Invalid JSON payload received."),
        ("anthropic", "the request's shape was refused: HTTP 400 from grader: max_tokens: Extra inputs"),
        ("vllm", "the request's shape was refused: HTTP 400 from grader: Extra inputs are not permitted"),
        ("openrouter", "the request's shape was refused: HTTP 400 from grader: Unsupported parameter"),
    ],
)
def test_check_reads_every_providers_error_as_a_run_does(make_llm_server, dialect, words):
    server = make_llm_server(dialect=dialect)
    add_on(server, "grader", key_variable="", model="reasoning-grader")  # sends a temperature it refuses
    err = StringIO()
    with pytest.raises(CommandError, match="does not work yet"):
        call_command("endpoint", "check", "grader", stdout=StringIO(), stderr=err)
    assert words in err.getvalue()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"key": "sk-wrong"}, "the key from OPENAI_API_KEY was refused"),
        ({"model": "missing-model"}, "the model 'missing-model' does not exist"),
        # A reasoning model saved as an ordinary one: it refuses the temperature.
        ({"model": "reasoning-grader"}, "the request's shape was refused"),
        ({"key": None}, "OPENAI_API_KEY (the API key) is not set"),
    ],
)
def test_check_says_which_part_fails(make_llm_server, monkeypatch, options, words):
    server = make_llm_server(api_key="sk-right")
    if options.get("key", "sk-right") is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", options.get("key", "sk-right"))
    add_on(server, "grader", **({"model": options["model"]} if "model" in options else {}))
    err = StringIO()
    with pytest.raises(CommandError, match="does not work yet"):
        call_command("endpoint", "check", "grader", stdout=StringIO(), stderr=err)
    assert words in err.getvalue()
    assert "sk-right" not in err.getvalue()


def test_resume_is_checked_like_a_launch(llm_server, settings):
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    add_on(llm_server, "grader", key_variable="")
    run_command("grade", "--name", "later", "--grader", "grader", "--responses-from", source.name)
    run = Run.objects.get(name="later")
    Run.objects.filter(id=run.id).update(status=Run.Status.FAILED)
    # Its snapshot names a variable the operator has since taken off the allowlist.
    GraderConfig.objects.filter(runs=run).update(api_key_env="OLD_KEY")
    with pytest.raises(CommandError, match=r"(?s)grader endpoint grader: .*OLD_KEY.*nothing was queued") as refused:
        run_command("grade", "--resume", "later")
    assert "not on the operator's allowlist" in str(refused.value)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    GraderConfig.objects.filter(runs=run).update(api_key_env="")
    run_command("grade", "--resume", "later")
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE


def cli(*args, var_dir: Path, program: str = "manage.py") -> subprocess.CompletedProcess:
    env = os.environ | {"VAR_DIR": str(var_dir), "LOG_LEVEL": "WARNING"}
    env.pop("DATABASE_URL", None)
    command = [sys.executable, str(REPO / "manage.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False)


@pytest.mark.parametrize(
    "args",
    [
        ["import_healthbench", "missing.jsonl"],
        ["endpoint", "list"],
        ["grade", "--list-endpoints"],
        ["run_report", "x"],
        ["createsuperuser", "--noinput", "--username", "x"],
    ],
)
def test_every_command_on_an_unmigrated_database_says_run_migrate_first(tmp_path, args):
    done = cli(*args, var_dir=tmp_path)
    assert done.returncode == 1
    assert "not migrated" in done.stderr
    assert "Run migrate first: manage.py migrate" in done.stderr
    assert "Traceback" not in done.stderr


def test_after_migrate_the_commands_run(tmp_path):
    assert cli("migrate", "-v0", var_dir=tmp_path).returncode == 0
    done = cli("endpoint", "list", var_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no endpoints yet")


# --- endpoint check --batch ---------------------------------------------------------------------


def test_check_batch_uploads_the_runs_line_creates_a_batch_and_cancels_it(llm_server):
    add_on(llm_server, "grader", key_variable="", batch_discount="0.5")
    llm_server.batches.validating_seconds = 2.0  # a provider's batch is still open when the cancel arrives
    said, _ = run_command("endpoint", "check", "grader", "--batch")
    assert said.rstrip().endswith("grader works.")
    (line,) = [line for line in said.splitlines() if line.startswith("batch: ")]
    assert "created batch batch_" in line
    assert "for /v1/chat/completions, cancelled it (cancelling)" in line
    assert llm_server.batches.created == 1
    assert llm_server.batches.cancels == 1
    # The uploaded line holds the request the live check sent, as a run's provider batch would.
    (stored,) = llm_server.batches.files.values()
    uploaded = json.loads(stored.data)
    path, body = llm_server.requests[-1]
    assert uploaded["url"] == "/v1" + path.removeprefix("/v1")
    assert uploaded["body"] == body


def test_check_batch_refuses_an_endpoint_without_a_batch_api(llm_server):
    add_on(llm_server, "plain", key_variable="")  # not OpenAI's URL: the preset's discount is dropped
    err = StringIO()
    with pytest.raises(CommandError, match="does not work yet"):
        call_command("endpoint", "check", "plain", "--batch", stdout=StringIO(), stderr=err)
    assert "batch: not tried: this endpoint is saved without a Batch API" in err.getvalue()
    assert llm_server.batches.created == 0


def test_check_batch_names_the_step_a_server_without_a_batch_api_refuses(make_llm_server):
    server = make_llm_server(dialect="ollama")  # Ollama answers chat calls but has no Batch API
    add_on(server, "local", key_variable="", batch_discount="0.5")
    err, out = StringIO(), StringIO()
    with pytest.raises(CommandError, match="does not work yet"):
        call_command("endpoint", "check", "local", "--batch", stdout=out, stderr=err)
    assert "batch: the Batch API refused uploading the batch file" in err.getvalue()
    assert server.batches.created == 0
