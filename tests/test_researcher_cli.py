"""The researcher's job from the command line: endpoint add (the curator form's rules), list and
check (one real call); grade --list-endpoints; grade --resume checked like a launch; every
command on an unmigrated database says "run migrate first"."""

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from grading.models import Endpoint, GraderConfig, Run
from grading.pipeline.batches import batch_run
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
    assert said.rstrip().endswith("grader works.")
    assert server.calls == 1


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
