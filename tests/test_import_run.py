"""import_run: a simple-evals HealthBench results file becomes a Run with its responses and grades.

The results files here are written by the helpers below in the reference's format (see
simple-evals ``healthbench_eval.py``: ``example_level_metadata`` in ``*_allresults.json``).
"""

import hashlib
import json
from collections.abc import Sequence
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Criterion
from grading.models import Grade, Response, Run
from grading.reports import run_import as run_import_module
from grading.reports.results_file import ResultsInvalid, parse_results
from tests import healthbench_rows as rows

# --- writing results files ------------------------------------------------------------------


def graded(item: dict, met: bool | None, explanation: str = "") -> dict:
    """A rubric item of the dataset as the reference writes it back with its grade."""
    return {**item, "criteria_met": met, "explanation": explanation or f"criteria_met is {met}."}


def result_example(prompt_id: str, items: list[dict], completion: str = "Rest, drink fluids.") -> dict:
    """One entry of example_level_metadata, keys in the reference's order."""
    return {
        "score": None,  # recomputed on import; the reference's value is not read
        "usage": {
            "input_tokens": 120,
            "input_cached_tokens": 0,
            "output_tokens": 45,
            "output_reasoning_tokens": 0,
            "total_tokens": 165,
        },
        "rubric_items": items,
        "prompt": [{"content": "What should I do?", "role": "user"}],
        "completion": [{"content": completion, "role": "assistant"}],
        "prompt_id": prompt_id,
        "completion_id": hashlib.sha256((prompt_id + completion).encode()).hexdigest(),
    }


def graded_row(data: dict, met: Sequence[bool | None], completion: str = "Rest, drink fluids.") -> dict:
    """A result example grading every criterion of a dataset row (see tests.healthbench_rows)."""
    items = [graded(item, m) for item, m in zip(data["rubrics"], met, strict=True)]
    return result_example(data["prompt_id"], items, completion)


def results_document(examples: list[dict]) -> dict:
    return {
        "score": 0.5,
        "metrics": {"overall_score": 0.5},
        "htmls": ["<p>html</p>" for _ in examples],
        "convos": [e["prompt"] + e["completion"] for e in examples],
        "metadata": {"example_level_metadata": examples},
    }


def write_results(path, examples: list[dict], *, indent: int | None = 2):
    """Write the file as simple-evals does (json.dumps(..., indent=2)) and return its path."""
    path.write_text(json.dumps(results_document(examples), indent=indent))
    return path


def import_dataset(tmp_path, *data: dict) -> None:
    dataset = tmp_path / "dataset.jsonl"
    rows.write(dataset, *data)
    call_command("import_healthbench", str(dataset), stdout=StringIO())


def import_run(path, name: str = "run-1", **options) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_run", str(path), name=name, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def failed_import(path, name: str = "run-1", **options) -> str:
    err = StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command("import_run", str(path), name=name, stdout=StringIO(), stderr=err, **options)
    return err.getvalue() + str(excinfo.value)


def nothing_written() -> bool:
    return not (Run.objects.exists() or Response.objects.exists() or Grade.objects.exists())


# --- importing ------------------------------------------------------------------------------


@pytest.fixture
def dataset(db, tmp_path):
    headache, emergency = rows.row("p-1"), rows.consensus_row("p-c")
    import_dataset(tmp_path, headache, emergency)
    return {"p-1": headache, "p-c": emergency}


def test_it_imports_one_response_per_example_and_one_grade_per_rubric_item(dataset, tmp_path):
    path = write_results(
        tmp_path / "healthbench_gpt_allresults.json",
        [graded_row(dataset["p-1"], [True, False, False]), graded_row(dataset["p-c"], [True, True, False, True])],
    )
    out, _ = import_run(path)
    assert "2 responses" in out
    assert "7 grades (0 failed)" in out
    run = Run.objects.get(name="run-1")
    assert run.status == Run.Status.IMPORTED
    assert run.source_file == str(path)
    response = Response.objects.get(conversation__prompt_id="p-1")
    assert response.source == Response.Source.IMPORTED
    assert response.text == "Rest, drink fluids."
    assert response.completion_id == hashlib.sha256(b"p-1Rest, drink fluids.").hexdigest()
    assert (response.sample_index, response.prompt_tokens, response.completion_tokens) == (0, 120, 45)
    grades = list(Grade.objects.filter(run=run, response=response).order_by("position"))
    criteria = list(Criterion.objects.filter(conversation__prompt_id="p-1").order_by("position"))
    assert [g.criterion_id for g in grades] == [c.id for c in criteria]
    assert [(g.criterion_text, g.points, g.tags) for g in grades] == [(c.text, c.points, c.tags) for c in criteria]
    assert [g.position for g in grades] == [0, 1, 2]
    assert [g.met for g in grades] == [True, False, False]
    assert {g.status for g in grades} == {Grade.Status.GRADED}
    assert grades[0].explanation == "criteria_met is True."


def test_repeated_prompt_ids_are_further_samples_in_file_order(dataset, tmp_path):
    examples = [graded_row(dataset["p-1"], [True, True, False], completion=f"Sample {k}.") for k in range(3)]
    examples.insert(1, graded_row(dataset["p-c"], [True, True, False, True]))
    import_run(write_results(tmp_path / "r.json", examples))
    samples = Response.objects.filter(conversation__prompt_id="p-1").order_by("sample_index")
    assert [(r.sample_index, r.text) for r in samples] == [(0, "Sample 0."), (1, "Sample 1."), (2, "Sample 2.")]
    assert Response.objects.get(conversation__prompt_id="p-c").sample_index == 0
    assert Run.objects.get().samples == 3
    # Each sample has its own grades, matched to the same criteria.
    assert Grade.objects.filter(response__in=samples, criterion__isnull=False).count() == 9


def test_a_null_criteria_met_is_a_failed_grade_not_a_not_met(dataset, tmp_path):
    out, _ = import_run(write_results(tmp_path / "r.json", [graded_row(dataset["p-1"], [True, None, False])]))
    assert "(1 failed)" in out
    failed = Grade.objects.get(position=1)
    assert (failed.status, failed.met) == (Grade.Status.FAILED, None)


def test_an_edited_rubric_item_keeps_its_text_without_a_criterion(dataset, tmp_path):
    items = [graded(i, True) for i in dataset["p-1"]["rubrics"]]
    items[1] = {**items[1], "criterion": "A criterion the stored rubric does not have."}
    out, _ = import_run(write_results(tmp_path / "r.json", [result_example("p-1", items)]))
    assert "1 grade(s) matched no criterion" in out
    grade = Grade.objects.get(position=1)
    assert grade.criterion is None
    assert grade.criterion_text == "A criterion the stored rubric does not have."


def test_identical_criteria_are_matched_by_occurrence(db, tmp_path):
    twice = rows.rubric_item("Asks how long the symptoms have lasted.", 4)
    data = rows.row("p-2", rubrics=[twice, rows.rubric_item("Suggests rest.", 5), twice])
    import_dataset(tmp_path, data)
    import_run(write_results(tmp_path / "r.json", [graded_row(data, [True, True, False])]))
    criteria = list(Criterion.objects.order_by("position").values_list("id", flat=True))
    assert list(Grade.objects.order_by("position").values_list("criterion_id", flat=True)) == criteria


def test_a_compact_file_imports_like_an_indented_one(dataset, tmp_path):
    example = graded_row(dataset["p-1"], [True, False, True])
    indented = parse_results(write_results(tmp_path / "a.json", [example]).read_bytes())
    compact = parse_results(write_results(tmp_path / "b.json", [example], indent=None).read_bytes())
    assert indented == compact
    document = results_document([example])
    reordered = json.dumps({"metadata": document["metadata"], **document}, indent=2).encode()
    assert parse_results(reordered) == indented


# --- refusing -------------------------------------------------------------------------------


def test_unknown_prompt_ids_fail_the_import_and_are_all_listed(dataset, tmp_path):
    examples = [
        graded_row(dataset["p-1"], [True, False, False]),
        result_example("not-imported-1", [graded(rows.rubric_item("Says hello.", 5), True)]),
        result_example("not-imported-2", [graded(rows.rubric_item("Says hello.", 5), True)]),
        result_example("not-imported-1", [graded(rows.rubric_item("Says hello.", 5), False)]),
    ]
    message = failed_import(write_results(tmp_path / "r.json", examples))
    assert "2 prompt_id(s) are not in the database" in message
    assert "import the dataset first" in message
    assert "not-imported-1  (examples 1, 3)" in message
    assert "not-imported-2  (example 2)" in message
    assert nothing_written()


def test_skip_unknown_imports_the_rest_and_lists_the_skipped(dataset, tmp_path):
    examples = [
        result_example("not-imported", [graded(rows.rubric_item("Says hello.", 5), True)]),
        graded_row(dataset["p-1"], [True, False, False]),
    ]
    out, err = import_run(write_results(tmp_path / "r.json", examples), skip_unknown=True)
    assert "skipped 1 unknown prompt_id(s)" in err
    assert "not-imported  (example 0)" in err
    assert "1 responses" in out
    assert Response.objects.get().conversation.prompt_id == "p-1"


def test_a_file_of_only_unknown_prompt_ids_imports_nothing_even_when_skipping(db, tmp_path):
    example = result_example("not-imported", [graded(rows.rubric_item("Says hello.", 5), True)])
    assert "nothing to import" in failed_import(write_results(tmp_path / "r.json", [example]), skip_unknown=True)
    assert nothing_written()


@pytest.mark.parametrize("bad", ["yes", 1, 0, "true", [True]])
def test_a_bad_criteria_met_names_the_example_and_the_field(dataset, tmp_path, bad):
    example = graded_row(dataset["p-c"], [True, True, False, True])
    example["rubric_items"][2]["criteria_met"] = bad
    examples = [graded_row(dataset["p-1"], [True, False, False]), example]
    message = failed_import(write_results(tmp_path / "r.json", examples))
    assert "example 1 (prompt_id 'p-c'), field rubric_items[2].criteria_met: must be true, false or null" in message
    assert nothing_written()


def test_a_missing_criteria_met_is_an_error_not_a_failed_grade(dataset, tmp_path):
    example = graded_row(dataset["p-1"], [True, False, False])
    del example["rubric_items"][0]["criteria_met"]
    message = failed_import(write_results(tmp_path / "r.json", [example]))
    assert "example 0 (prompt_id 'p-1'), field rubric_items[0].criteria_met: is missing" in message


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"completion": [{"content": "Hi", "role": "user"}]}, "completion[0].role"),
        ({"completion": []}, "completion"),
        ({"prompt_id": 7}, "prompt_id"),
        ({"rubric_items": []}, "rubric_items"),
    ],
)
def test_a_malformed_example_names_its_field(dataset, tmp_path, change, field):
    example = {**graded_row(dataset["p-1"], [True, False, False]), **change}
    message = failed_import(write_results(tmp_path / "r.json", [example]))
    assert "example 0" in message
    assert f"field {field}:" in message
    assert nothing_written()


def test_every_bad_example_is_listed(dataset, tmp_path):
    examples = [graded_row(dataset["p-1"], [True, False, False]) for _ in range(3)]
    examples[0]["rubric_items"][0]["points"] = "five"
    examples[2]["rubric_items"][1]["tags"] = ["axis:accuracy", "axis:accuracy"]
    with pytest.raises(ResultsInvalid) as excinfo:
        parse_results(write_results(tmp_path / "r.json", examples).read_bytes())
    where = [(e.index, e.field) for e in excinfo.value.errors]
    assert where == [(0, "rubric_items[0].points"), (2, "rubric_items[1].tags")]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "the file has no rows"),
        (b'{"score": 0.5, "metrics": {}', "is not valid JSON"),
        (b'{"score": 0.5}', "not a simple-evals *_allresults.json file"),
        (b'{"metadata": {"example_level_metadata": []}}', "is empty"),
    ],
)
def test_a_file_that_is_not_a_results_file_is_refused(db, tmp_path, content, expected):
    path = tmp_path / "r.json"
    path.write_bytes(content)
    assert expected in failed_import(path)


def test_an_existing_run_name_is_an_error(dataset, tmp_path):
    path = write_results(tmp_path / "r.json", [graded_row(dataset["p-1"], [True, False, False])])
    import_run(path)
    assert "a run named 'run-1' already exists" in failed_import(path)
    assert Run.objects.count() == 1
    assert Response.objects.count() == 1


def test_a_failure_while_writing_grades_leaves_nothing_behind(dataset, tmp_path, monkeypatch):
    real = run_import_module.insert_rows

    def insert_rows(model, columns, rows):
        if model is Grade:
            raise RuntimeError("disk full")
        return real(model, columns, rows)

    monkeypatch.setattr(run_import_module, "insert_rows", insert_rows)
    path = write_results(tmp_path / "r.json", [graded_row(dataset["p-1"], [True, False, False])])
    with pytest.raises(RuntimeError):
        import_run(path)
    assert nothing_written()
