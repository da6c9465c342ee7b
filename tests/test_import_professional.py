"""HealthBench Professional rows: imported with their own fields, reported by them, scored with the
length adjustment and exported back byte for byte.

No Professional file is in the shared samples, so the rows here are written for the test in the
shape the dataset card (`openai/healthbench-professional`) describes: `conversation` (user and
assistant messages ending with a user turn), `rubric_items` with `criterion_text` and `points`,
`use_case`, `type`, `difficulty`, `specialty`, `physician_response`, plus `id` and `canary_string`.
"""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Conversation, Criterion, Physician, Subset
from grading.models import Run
from grading.reports.report import run_report
from tests.healthbench_rows import row, write
from tests.test_grade_command import grade, grader_args, policy_args  # noqa: F401 (fixture)
from tests.test_report_pages import make_user

pytest_plugins = ["tests.llm_server"]
pytestmark = pytest.mark.django_db


def professional_row(row_id: str = "pro-1", **overrides) -> dict:
    data = {
        "id": row_id,
        "conversation": [
            {"role": "user", "content": "58-year-old with new atrial fibrillation, CHA2DS2-VASc 2. Anticoagulate?"},
            {"role": "assistant", "content": "Any bleeding history or kidney disease?"},
            {"role": "user", "content": "No bleeding; eGFR 75. Draft the plan for the note."},
        ],
        "rubric_items": [
            {"criterion_text": "Recommends a DOAC over warfarin absent contraindications.", "points": 7},
            {"criterion_text": "Mentions reassessing bleeding risk (HAS-BLED).", "points": 4},
            {"criterion_text": "Recommends aspirin alone for stroke prevention.", "points": -8},
        ],
        "use_case": "consult",
        "type": "good_faith",
        "difficulty": "typical",
        "specialty": "cardiology",
        "physician_response": "Start apixaban 5 mg twice daily; review renal function yearly. \u2014 Dr A",
        "canary_string": "test:healthbench-studio-professional",
    }
    data.update(overrides)
    return data


def _import(path, *args) -> str:
    out = io.StringIO()
    call_command("import_healthbench", path, *args, stdout=out)
    return out.getvalue()


def _export(subset: str, tmp_path) -> list[str]:
    out = tmp_path / f"{subset}-export.jsonl"
    call_command("export_healthbench", subset=subset, out=out)
    return out.read_text().splitlines()


def test_it_recognises_professional_rows_by_their_content_and_says_so(tmp_path):
    path = tmp_path / "anything.jsonl"
    write(path, professional_row("pro-1"), professional_row("pro-2", use_case="writing", type="red_teaming"))
    out = _import(path)
    assert "2 recognised as HealthBench Professional rows" in out
    conversation = Conversation.objects.get(prompt_id="pro-2")
    assert conversation.example_tags == [
        "use_case:writing",
        "type:red_teaming",
        "difficulty:typical",
        "specialty:cardiology",
    ]
    assert conversation.professional is not None
    assert conversation.professional["fields"]["physician_response"].startswith("Start apixaban")
    assert conversation.canary == "test:healthbench-studio-professional"
    assert conversation.messages[-1] == {
        "content": "No bleeding; eGFR 75. Draft the plan for the note.",
        "role": "user",
    }
    criteria = list(Criterion.objects.filter(conversation=conversation).values_list("text", "points", "level", "tags"))
    assert criteria[2] == ("Recommends aspirin alone for stroke prevention.", -8, "example", [])


def test_it_exports_professional_rows_back_byte_for_byte(tmp_path):
    path = tmp_path / "pro.jsonl"
    # Both conversation shapes the card's readers meet, a row without an id, key orders that differ.
    object_shape = professional_row("pro-2", conversation={"messages": professional_row()["conversation"]})
    no_id = {k: v for k, v in professional_row().items() if k != "id"}
    later = {k: v for k, v in professional_row("pro-3", difficulty=None).items() if k != "physician_response"}
    reordered = {"physician_response": None, **later, "rubric_items": [{"points": 2, "criterion_text": "Plain words."}]}
    write(path, professional_row("pro-1"), object_shape, no_id, reordered)
    _import(path, "--subset", "pro")
    assert _export("pro", tmp_path) == path.read_text().splitlines()
    # Importing the file again merges every row: nothing doubles.
    _import(path, "--subset", "pro")
    assert Conversation.objects.count() == 4
    assert _export("pro", tmp_path) == path.read_text().splitlines()


def test_main_and_professional_rows_share_a_file_and_each_comes_back_in_its_shape(tmp_path):
    path = tmp_path / "mixed.jsonl"
    write(path, row("p-1"), professional_row("pro-1"))
    _import(path)
    assert _export("all", tmp_path) == path.read_text().splitlines()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"use_case": None, "specialty": 3}, "line 2, field specialty: must be a string or null, not 3"),
        (
            {"rubric_items": [{"criterion_text": "x", "points": 0}]},
            "line 2, field rubric_items[0].points: 0 is outside",
        ),
        (
            {"rubric_items": [{"criterion": "x", "points": 2}]},
            "line 2, field rubric_items[0].criterion_text: is missing",
        ),
        (
            {"conversation": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "?"}]},
            "conversation[1].role",
        ),
        ({"example_tags": []}, "line 2, field example_tags: is not a field of a HealthBench Professional row"),
    ],
)
def test_a_bad_professional_line_names_its_line_and_field_and_nothing_is_stored(tmp_path, capsys, change, message):
    path = tmp_path / "bad.jsonl"
    write(path, professional_row("pro-1"), professional_row("pro-2", **change))
    with pytest.raises(CommandError, match="the database is unchanged"):
        _import(path)
    assert message in capsys.readouterr().err
    assert Conversation.objects.count() == 0


def test_a_missing_label_is_named():
    from annotation.formats.healthbench import RowInvalid
    from annotation.formats.professional import parse_any_line

    data = professional_row()
    del data["physician_response"]
    with pytest.raises(RowInvalid, match="line 4, field physician_response: is missing"):
        parse_any_line(4, json.dumps(data).encode())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_tasks")
def test_a_run_on_professional_rows_is_length_adjusted_and_scored_by_their_labels(grade, llm_server, tmp_path, client):  # noqa: F811
    path = tmp_path / "pro.jsonl"
    write(path, professional_row("pro-1"), professional_row("pro-2", use_case="research", difficulty="difficult"))
    _import(path, "--subset", "pro")
    assert Subset.objects.get(name="pro").conversations.count() == 2
    grade("--name", "pro-run", *grader_args(llm_server), *policy_args(llm_server), "--subset", "pro", "--wait")
    run = Run.objects.get(name="pro-run")
    assert run.healthbench_professional
    metrics = run_report(run=run).data["metrics"]
    assert run_report(run=run).data["length_adjustment"] == {"centre": 2000, "penalty_per_500": 0.0147}
    for tag in (
        "use_case:consult",
        "use_case:research",
        "type:good_faith",
        "difficulty:difficult",
        "specialty:cardiology",
    ):
        assert metrics[f"{tag}:n_samples"] >= 1
        assert f"{tag}_length_adjusted" in metrics
    assert metrics["specialty:cardiology:n_samples"] == 2
    client.force_login(make_user(Physician.Role.RESEARCHER))
    page = client.get(reverse("report_detail", args=[run.code])).content.decode()
    for heading in ("By use case", "By type", "By difficulty", "By specialty"):
        assert heading in page
    assert "use_case:research" in page
