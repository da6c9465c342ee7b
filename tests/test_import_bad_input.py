"""Every kind of bad input: a non-zero exit, a message naming the line and field, nothing written."""

import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command, load_command_class

from annotation.management.import_command import ImportCommand
from annotation.models import ConsensusCriterion, Conversation, Criterion, Subset
from tests.conftest import REPO
from tests.healthbench_rows import line, row, rubric_item

pytestmark = pytest.mark.django_db


def _import_fails(tmp_path, bad_line: bytes, *, match: str, capsys) -> str:
    """Import a file whose line 1 is good and line 2 is bad; return what was reported."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(line(row("good-1")) + bad_line + b"\n")
    with pytest.raises(CommandError, match="database is unchanged"):
        call_command("import_healthbench", path)
    report = capsys.readouterr().err
    assert match in report, report
    assert Conversation.objects.count() == 0
    assert Criterion.objects.count() == 0
    assert ConsensusCriterion.objects.count() == 0
    assert Subset.objects.count() == 0
    return report


def test_it_rejects_truncated_json(tmp_path, capsys):
    truncated = line(row("p-2"))[:120]
    _import_fails(tmp_path, truncated, match="line 2: is not valid JSON", capsys=capsys)


def test_it_rejects_a_missing_field(tmp_path, capsys):
    data = row("p-2")
    del data["rubrics"]
    _import_fails(tmp_path, line(data), match="line 2, field rubrics: is missing", capsys=capsys)


def test_it_rejects_a_missing_criterion_field(tmp_path, capsys):
    data = row("p-2")
    del data["rubrics"][1]["points"]
    _import_fails(tmp_path, line(data), match="line 2, field rubrics[1].points: is missing", capsys=capsys)


def test_it_rejects_zero_points(tmp_path, capsys):
    data = row("p-2", rubrics=[rubric_item("Says hello.", 0)])
    _import_fails(tmp_path, line(data), match="line 2, field rubrics[0].points: 0 points is not allowed", capsys=capsys)


def test_it_rejects_eleven_points(tmp_path, capsys):
    data = row("p-2", rubrics=[rubric_item("Says hello.", 11)])
    _import_fails(tmp_path, line(data), match="line 2, field rubrics[0].points: 11 is outside -10..10", capsys=capsys)


def test_it_rejects_fractional_points(tmp_path, capsys):
    data = row("p-2", rubrics=[rubric_item("Says hello.", 5), rubric_item("Says bye.", 2.5)])
    _import_fails(
        tmp_path,
        line(data),
        match="line 2, field rubrics[1].points: must be a whole number from -10 to 10, not 2.5",
        capsys=capsys,
    )


def test_it_rejects_boolean_points(tmp_path, capsys):
    data = row("p-2", rubrics=[rubric_item("Says hello.", True)])
    _import_fails(tmp_path, line(data), match="rubrics[0].points: must be a whole number", capsys=capsys)


def test_it_rejects_an_unknown_role(tmp_path, capsys):
    data = row("p-2")
    data["prompt"][1]["role"] = "doctor"
    _import_fails(tmp_path, line(data), match="line 2, field prompt[1].role: unknown role 'doctor'", capsys=capsys)


def test_it_rejects_an_empty_conversation(tmp_path, capsys):
    data = row("p-2", prompt=[])
    _import_fails(tmp_path, line(data), match="line 2, field prompt: the conversation is empty", capsys=capsys)


def test_it_rejects_a_conversation_that_ends_with_the_assistant(tmp_path, capsys):
    data = row("p-2")
    data["prompt"].append({"content": "Drink water.", "role": "assistant"})
    _import_fails(
        tmp_path,
        line(data),
        match="line 2, field prompt[3].role: the conversation must end with a user turn",
        capsys=capsys,
    )


def test_it_rejects_a_duplicate_prompt_id_within_a_file(tmp_path, capsys):
    _import_fails(
        tmp_path,
        line(row("good-1")),
        match="line 2, field prompt_id: 'good-1' already appears on line 1",
        capsys=capsys,
    )


def test_it_rejects_invalid_utf8(tmp_path, capsys):
    bad = line(row("p-2")).replace(b"mild", b"m\xffld")
    _import_fails(tmp_path, bad, match="line 2: is not valid UTF-8 (byte 0xff", capsys=capsys)


def test_it_rejects_an_unknown_axis(tmp_path, capsys):
    data = row("p-2", rubrics=[{"criterion": "Says hello.", "points": 3, "tags": ["level:example", "axis:kindness"]}])
    _import_fails(
        tmp_path, line(data), match="line 2, field rubrics[0].tags: needs exactly one axis tag", capsys=capsys
    )


def test_it_rejects_a_cluster_criterion_without_its_cluster_tag(tmp_path, capsys):
    data = row("p-2", rubrics=[{"criterion": "Says hello.", "points": 5, "tags": ["level:cluster", "axis:accuracy"]}])
    _import_fails(
        tmp_path,
        line(data),
        match="rubrics[0].tags: a level:cluster criterion needs exactly one cluster: tag",
        capsys=capsys,
    )


def test_it_rejects_an_unknown_row_field(tmp_path, capsys):
    data = row("p-2", prompt_response="extra")
    _import_fails(
        tmp_path, line(data), match="line 2, field prompt_response: is not a field of a HealthBench row", capsys=capsys
    )


def test_it_lists_every_bad_line_not_just_the_first(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(line(row("p-1", prompt=[])) + line(row("p-2")) + b"{oops\n")
    with pytest.raises(CommandError):
        call_command("import_healthbench", path)
    report = capsys.readouterr().err
    assert "line 1, field prompt" in report
    assert "line 3: is not valid JSON" in report


def test_a_missing_file_is_reported_plainly(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("import_healthbench", tmp_path / "absent.jsonl")


def test_the_command_exits_non_zero_with_the_line_on_stderr(tmp_path, migrated_var_dir):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(row("p-1", rubrics=[rubric_item("Says hello.", 0)])).encode() + b"\n")
    env = {"VAR_DIR": str(migrated_var_dir), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "manage.py", "import_healthbench", str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "line 1, field rubrics[0].points" in done.stderr


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("import_healthbench", {}),
        ("import_meta_eval", {}),
        ("import_run", {"name": "r"}),
        ("import_grader_labels", {"name": "r"}),
    ],
)
def test_every_import_command_refuses_alike(tmp_path, command, options):
    app = "annotation" if command == "import_healthbench" else "grading"
    assert isinstance(load_command_class(app, command), ImportCommand)
    with pytest.raises(CommandError, match="cannot read"):
        call_command(command, tmp_path / "missing.jsonl", **options)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(CommandError, match=r"empty\.jsonl: .*the database is unchanged"):
        call_command(command, empty, **options)
