"""Every importer, fed one file per bad case (tests/bad_inputs.py), refuses it the same way:
a non-zero exit or an error page, a message naming the line (or example) and the field, no
traceback, and the database exactly as it was."""

import html
import subprocess
import sys
from io import StringIO

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.formats.importer import import_healthbench_lines
from annotation.models import Physician
from grading.metaeval.importer import meta_eval_import
from tests import bad_inputs
from tests.conftest import REPO
from tests.healthbench_rows import line, row
from tests.metaeval_rows import lines, meta_row
from tests.people import person

pytestmark = pytest.mark.django_db


def _counts() -> dict[str, int]:
    return {
        m._meta.label: m._default_manager.count()
        for app in ("annotation", "grading")
        for m in apps.get_app_config(app).get_models()
    }


@pytest.fixture
def stored(db):
    """Some data already in the database, which a refused file must leave as it is."""
    import_healthbench_lines([line(row("p-0"))])
    meta_eval_import(lines=lines(meta_row("p-1", "c-1")))
    return _counts()


def _expected(case: bad_inputs.BadCase) -> str:
    if not case.line:
        return case.message
    return f"line {case.line}" + (f", field {case.field}" if case.field else "") + f": {case.message}"


def _run_command(name: str, path, *args: str) -> str:
    err = StringIO()
    with pytest.raises(CommandError, match="database is unchanged"):
        call_command(name, str(path), *args, stdout=StringIO(), stderr=err)
    report = err.getvalue()
    assert "Traceback" not in report
    return report


def _ids(cases):
    return [c.name for c in cases]


@pytest.mark.parametrize("case", bad_inputs.healthbench_cases(), ids=_ids(bad_inputs.healthbench_cases()))
def test_import_healthbench_refuses(case, stored, tmp_path):
    path = tmp_path / f"{case.name}.jsonl"
    path.write_bytes(case.content)
    report = _run_command("import_healthbench", path)
    assert f"{path}: {_expected(case)}" in report, report
    assert _counts() == stored


@pytest.mark.parametrize("case", bad_inputs.healthbench_cases(), ids=_ids(bad_inputs.healthbench_cases()))
def test_the_browser_import_refuses(case, stored, client):
    client.force_login(person("curator", Physician.Role.CURATOR))
    stored = _counts()
    upload = SimpleUploadedFile(f"{case.name}.jsonl", case.content, content_type="application/jsonl")
    response = client.post(reverse("curator_import"), {"file": upload})
    page = response.content.decode()
    if case.content:
        assert response.status_code == 400
        assert f"The database is unchanged. Fix these lines of <code>{case.name}.jsonl</code>" in page
        row_html = f'<td class="num">{case.line or "—"}</td><td><code>{html.escape(case.field) or "—"}</code></td>'
        assert row_html in page, page
        assert html.escape(case.message) in page
    else:
        # An empty upload never reaches the importer: the form says so beside the field.
        assert response.status_code == 400
        assert "The submitted file is empty." in page
    assert "Traceback" not in page
    assert _counts() == stored


@pytest.mark.parametrize("case", bad_inputs.meta_eval_cases(), ids=_ids(bad_inputs.meta_eval_cases()))
def test_import_meta_eval_refuses(case, stored, tmp_path):
    path = tmp_path / f"{case.name}.jsonl"
    path.write_bytes(case.content)
    report = _run_command("import_meta_eval", path)
    assert f"{path}: {_expected(case)}" in report, report
    assert _counts() == stored


@pytest.mark.parametrize("case", bad_inputs.grader_label_cases(), ids=_ids(bad_inputs.grader_label_cases()))
def test_import_grader_labels_refuses(case, stored, tmp_path):
    path = tmp_path / f"{case.name}.jsonl"
    path.write_bytes(case.content)
    report = _run_command("import_grader_labels", path, "--name", "graded")
    assert f"{path}: {_expected(case)}" in report, report
    assert _counts() == stored


@pytest.mark.parametrize("case", bad_inputs.results_cases(), ids=_ids(bad_inputs.results_cases()))
def test_import_run_refuses(case, stored, tmp_path):
    before = _counts()
    path = tmp_path / f"{case.name}.json"
    path.write_bytes(case.content)
    report = _run_command("import_run", path, "--name", "imported")
    # Examples are named by their index and, when it is readable, their prompt_id.
    where = f"{path}: example {case.line}" if case.line else f"{path}: file"
    assert where in report, report
    assert (f"field {case.field}: " if case.field else ": ") + case.message in report, report
    assert _counts() == before


@pytest.mark.parametrize(
    ("command", "case"),
    [
        ("import_healthbench", next(c for c in bad_inputs.healthbench_cases() if c.name == "deep-nesting")),
        ("import_meta_eval", next(c for c in bad_inputs.meta_eval_cases() if c.name == "lone-surrogate")),
        ("import_run", next(c for c in bad_inputs.results_cases() if c.name == "deep-nesting")),
    ],
    ids=["healthbench-deep", "meta-eval-surrogate", "results-deep"],
)
def test_the_real_command_exits_non_zero_without_a_traceback(command, case, tmp_path, migrated_var_dir):
    # A real process, as a user runs it: the refusal is one message, never a Python traceback.
    path = tmp_path / case.name
    path.write_bytes(case.content)
    args = ["--name", "x"] if command == "import_run" else []
    done = subprocess.run(
        [sys.executable, "manage.py", command, str(path), *args],
        cwd=REPO,
        env={"VAR_DIR": str(migrated_var_dir), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "RecursionError" not in done.stderr
    assert case.message in done.stderr
