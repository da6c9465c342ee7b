"""import_grader_labels: a grader's labels on meta-eval items become one imported run."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grading.metaeval.importer import meta_eval_import
from grading.models import Grade, Run
from tests.metaeval_rows import CATEGORY, OTHER_CATEGORY, grader_row, lines, meta_row, rubric, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def items():
    """Three items: two criteria on response c-1, one on c-2."""
    rows = [meta_row("p-1", "c-1", CATEGORY), meta_row("p-1", "c-1", OTHER_CATEGORY), meta_row("p-1", "c-2", CATEGORY)]
    meta_eval_import(lines=lines(*rows))
    return rows


def _import(path, name="grader-a") -> str:
    out = StringIO()
    call_command("import_grader_labels", path, name=name, stdout=out)
    return out.getvalue()


def _import_fails(tmp_path, capsys, *rows, match: str, name="grader-a") -> str:
    path = tmp_path / "bad.jsonl"
    write(path, grader_row("p-1", "c-1", CATEGORY), *rows)
    runs, grades = Run.objects.count(), Grade.objects.count()
    with pytest.raises(CommandError, match="database is unchanged"):
        call_command("import_grader_labels", path, name=name)
    report = capsys.readouterr().err
    assert match in report, report
    assert (Run.objects.count(), Grade.objects.count()) == (runs, grades)
    return report


def test_it_creates_an_imported_run_with_one_graded_grade_per_row(tmp_path, items):
    path = tmp_path / "grader.jsonl"
    write(path, grader_row("p-1", "c-1", CATEGORY, True), grader_row("p-1", "c-2", CATEGORY, False, explanation="No."))
    assert "run 'grader-a' created with 2 grades" in _import(path)
    run = Run.objects.get(name="grader-a")
    assert run.status == Run.Status.IMPORTED
    grades = {g.response.completion_id: g for g in run.grades.select_related("response", "criterion")}
    assert grades["c-1"].met is True
    assert grades["c-2"].met is False
    assert grades["c-2"].explanation == "No."
    for grade in grades.values():
        assert grade.status == Grade.Status.GRADED
        assert (grade.criterion_text, grade.points, grade.tags) == (grade.criterion.text, 5, grade.criterion.tags)
        assert grade.criterion_text == rubric(CATEGORY)


def test_the_explanation_may_be_left_out(tmp_path, items):
    row = grader_row()
    del row["explanation"]
    path = tmp_path / "grader.jsonl"
    write(path, row)
    _import(path)
    assert Grade.objects.get().explanation == ""


def test_grades_of_one_response_get_distinct_positions(tmp_path, items):
    path = tmp_path / "grader.jsonl"
    write(path, grader_row("p-1", "c-1", OTHER_CATEGORY), grader_row("p-1", "c-1", CATEGORY))
    _import(path)
    assert sorted(Grade.objects.values_list("position", flat=True)) == [0, 1]


def test_reimporting_the_same_file_into_the_same_run_changes_nothing(tmp_path, items):
    path = tmp_path / "grader.jsonl"
    write(path, grader_row("p-1", "c-1", CATEGORY), grader_row("p-1", "c-2", CATEGORY, False))
    _import(path)
    before = list(Grade.objects.order_by("id").values())
    assert "already holds these labels; nothing changed" in _import(path)
    assert list(Grade.objects.order_by("id").values()) == before
    assert Run.objects.count() == 1


def test_it_refuses_a_different_file_into_an_existing_run(tmp_path, items):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    write(first, grader_row("p-1", "c-1", CATEGORY, True))
    write(second, grader_row("p-1", "c-1", CATEGORY, False))
    _import(first)
    with pytest.raises(CommandError, match="run 'grader-a' already exists with other grades"):
        _import(second)
    assert Grade.objects.get().met is True


def test_it_rejects_an_unknown_prompt_id(tmp_path, capsys, items):
    _import_fails(
        tmp_path, capsys, grader_row("p-9"), match="line 2, field prompt_id: no conversation has prompt_id 'p-9'"
    )


def test_it_rejects_an_unknown_completion_id(tmp_path, capsys, items):
    _import_fails(
        tmp_path,
        capsys,
        grader_row("p-1", "c-9"),
        match="line 2, field completion_id: conversation 'p-1' has no response 'c-9'",
    )


def test_it_rejects_a_category_not_attached_to_the_conversation(tmp_path, capsys, items):
    _import_fails(
        tmp_path,
        capsys,
        grader_row("p-1", "c-2", "cluster:hedging_never_attached"),
        match="line 2, field category: cluster:hedging_never_attached is not attached to conversation 'p-1'",
    )


@pytest.mark.parametrize("value", ["true", 1, None])
def test_it_rejects_criteria_met_that_is_not_a_json_boolean(tmp_path, capsys, items, value):
    _import_fails(
        tmp_path,
        capsys,
        grader_row("p-1", "c-2", met=value),
        match=f"line 2, field criteria_met: must be true or false, not {json.dumps(value)}",
    )


def test_it_rejects_a_missing_field(tmp_path, capsys, items):
    row = grader_row("p-1", "c-2")
    del row["category"]
    _import_fails(tmp_path, capsys, row, match="line 2, field category: is missing")


def test_it_rejects_truncated_json(tmp_path, capsys, items):
    _import_fails(
        tmp_path, capsys, json.dumps(grader_row("p-1", "c-2")).encode()[:40] + b"\n", match="line 2: is not valid JSON"
    )


def test_it_rejects_an_item_listed_twice(tmp_path, capsys, items):
    _import_fails(
        tmp_path,
        capsys,
        grader_row("p-1", "c-1", CATEGORY, False),
        match="line 2, field category: this (prompt_id, completion_id, category) item already appears on line 1",
    )


def test_it_refuses_an_empty_file(tmp_path, items, capsys):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"\n")
    with pytest.raises(CommandError, match="database is unchanged"):
        _import(path)
    assert "the file has no rows" in capsys.readouterr().err
    assert not Run.objects.exists()
