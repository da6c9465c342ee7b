"""import_meta_eval: physician labels from the public meta-eval file, atomically and idempotently."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import ConsensusCriterion, Conversation, Criterion, Physician, PhysicianLabel, Subset
from grading.models import Response
from tests.conftest import sample_file
from tests.healthbench_rows import consensus_row
from tests.healthbench_rows import write as write_healthbench
from tests.metaeval_rows import CATEGORY, OTHER_CATEGORY, meta_row, physician, rubric, write

pytestmark = pytest.mark.django_db

MODELS = [Conversation, Criterion, ConsensusCriterion, Response, Physician, PhysicianLabel, Subset]


def _counts() -> dict[str, int]:
    return {model.__name__: model._default_manager.count() for model in MODELS}


def _import(path) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_meta_eval", path, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _import_fails(tmp_path, capsys, *rows, match: str) -> str:
    """Import a file whose line 1 is good and the rest as given; nothing may be written."""
    path = tmp_path / "bad.jsonl"
    write(path, meta_row("good", "good-c"), *rows)
    before = _counts()
    with pytest.raises(CommandError, match="database is unchanged"):
        call_command("import_meta_eval", path)
    report = capsys.readouterr().err
    assert match in report, report
    assert _counts() == before
    return report


def test_it_imports_conversations_responses_criteria_physicians_and_labels(tmp_path):
    path = tmp_path / "meta.jsonl"
    write(
        path,
        meta_row("p-1", "c-1", CATEGORY, (True, False), (0, 1)),
        meta_row("p-1", "c-2", CATEGORY, (False, False, True), (0, 1, 2)),
        meta_row("p-1", "c-1", OTHER_CATEGORY, (True, True), (1, 2)),
    )
    out, _ = _import(path)
    assert "3 rows: 1 new conversations" in out
    conversation = Conversation.objects.get(prompt_id="p-1")
    assert conversation.messages == meta_row()["prompt"]
    assert sorted(conversation.responses.values_list("completion_id", "source")) == [
        ("c-1", "imported"),
        ("c-2", "imported"),
    ]
    attached = conversation.criteria.order_by("position")
    assert [c.consensus_criterion.cluster for c in attached] == [CATEGORY, OTHER_CATEGORY]
    assert [c.text for c in attached] == [rubric(CATEGORY), rubric(OTHER_CATEGORY)]
    assert all(c.level == Criterion.Level.CLUSTER and c.points == 5 for c in attached)
    assert Physician.objects.count() == 3
    assert PhysicianLabel.objects.count() == 7
    label = PhysicianLabel.objects.get(
        physician__anonymized_id=physician(2),
        response__completion_id="c-2",
        criterion__consensus_criterion__cluster=CATEGORY,
    )
    assert label.met is True


def test_reimporting_the_same_file_changes_nothing(tmp_path):
    path = tmp_path / "meta.jsonl"
    write(path, meta_row("p-1", "c-1"), meta_row("p-2", "c-2", OTHER_CATEGORY, (True, True, False), (0, 3, 4)))
    _import(path)
    before = _counts()
    labels = sorted(PhysicianLabel.objects.values_list("physician_id", "response_id", "criterion_id", "met"))
    out, _ = _import(path)
    assert _counts() == before
    assert sorted(PhysicianLabel.objects.values_list("physician_id", "response_id", "criterion_id", "met")) == labels
    assert "0 new conversations (2 already known), 0 responses" in out
    assert "0 physician labels added (5 already stored)" in out


def test_new_conversations_join_the_meta_eval_subset_only(tmp_path):
    path = tmp_path / "meta.jsonl"
    write(path, meta_row("p-1", "c-1"))
    _import(path)
    assert list(Subset.objects.values_list("name", flat=True)) == ["meta-eval"]
    assert Subset.objects.get(name="meta-eval").conversations.get().prompt_id == "p-1"


def test_an_anonymized_physician_has_no_login(tmp_path):
    path = tmp_path / "meta.jsonl"
    write(path, meta_row(physicians=(0, 1)))
    _import(path)
    assert set(Physician.objects.values_list("anonymized_id", "user_id")) == {
        (physician(0), None),
        (physician(1), None),
    }


def test_a_new_consensus_criterion_gets_five_points_its_theme_and_no_axis_tag(tmp_path):
    path = tmp_path / "meta.jsonl"
    write(path, meta_row(category=OTHER_CATEGORY))
    _, err = _import(path)
    entry = ConsensusCriterion.objects.get(cluster=OTHER_CATEGORY)
    assert (entry.text, entry.points, entry.axis, entry.theme) == (rubric(OTHER_CATEGORY), 5, "", "emergency_referrals")
    # The file names no axis: the attached criterion carries no made-up axis tag.
    assert Criterion.objects.get().tags == ["level:cluster", OTHER_CATEGORY]
    assert "added without an axis" in err


def test_it_reuses_the_criterion_a_healthbench_file_attached(tmp_path):
    data = consensus_row("p-1")
    write_healthbench(tmp_path / "consensus.jsonl", data)
    call_command("import_healthbench", tmp_path / "consensus.jsonl", stdout=StringIO())
    cluster_item = data["rubrics"][1]
    category = cluster_item["tags"][1]
    criteria = Criterion.objects.count()
    path = tmp_path / "meta.jsonl"
    write(path, meta_row("p-1", "c-1", category, prompt=data["prompt"], rubric=cluster_item["criterion"]))
    _import(path)
    assert Criterion.objects.count() == criteria
    label = PhysicianLabel.objects.first()
    assert label.criterion.tags == cluster_item["tags"]
    # A conversation that already existed keeps its subsets and joins meta-eval.
    assert set(Conversation.objects.get().subsets.values_list("name", flat=True)) == {"all", "meta-eval"}


def test_it_counts_a_physician_repeated_with_the_same_label_once_and_warns(tmp_path):
    path = tmp_path / "meta.jsonl"
    write(path, meta_row(labels=(True, False, True), physicians=(0, 1, 0)))
    out, err = _import(path)
    assert PhysicianLabel.objects.count() == 2
    assert sorted(PhysicianLabel.objects.values_list("repeats", flat=True)) == [0, 1]
    assert "line 1: physician" in err
    assert "listed twice with the same label" in err
    assert "1 repeated physician labels merged (the reference counts each as a pair)" in out


def test_it_rejects_labels_of_different_lengths(tmp_path, capsys):
    _import_fails(
        tmp_path,
        capsys,
        meta_row(labels=(True, False, True), physicians=(0, 1)),
        match="line 2, field anonymized_physician_ids: has 2 entries but binary_labels has 3",
    )


def test_it_rejects_a_non_boolean_label(tmp_path, capsys):
    _import_fails(
        tmp_path,
        capsys,
        meta_row(labels=(True, 1)),
        match="line 2, field binary_labels[1]: must be true or false, not 1",
    )


def test_it_rejects_an_empty_label_list(tmp_path, capsys):
    _import_fails(tmp_path, capsys, meta_row(labels=(), physicians=()), match="line 2, field binary_labels: is empty")


def test_physician_ids_are_opaque_strings_of_a_stated_length(tmp_path, capsys):
    path = tmp_path / "meta.jsonl"
    row = meta_row()
    row["anonymized_physician_ids"][1] = "dr-house"
    write(path, row)
    _import(path)
    assert Physician.objects.filter(anonymized_id="dr-house").exists()
    long = meta_row("p-2", "c-2")
    long["anonymized_physician_ids"][0] = "x" * 65
    _import_fails(
        tmp_path,
        capsys,
        long,
        match="line 2, field anonymized_physician_ids[0]: is 65 characters long; at most 64 are allowed",
    )
    empty = meta_row("p-3", "c-3")
    empty["anonymized_physician_ids"][0] = " "
    _import_fails(tmp_path, capsys, empty, match='line 2, field anonymized_physician_ids[0]: " " is not a non-empty')


def test_it_rejects_a_missing_field(tmp_path, capsys):
    row = meta_row()
    del row["completion_id"]
    _import_fails(tmp_path, capsys, row, match="line 2, field completion_id: is missing")


def test_it_rejects_truncated_json(tmp_path, capsys):
    truncated = json.dumps(meta_row()).encode()[:90] + b"\n"
    _import_fails(tmp_path, capsys, truncated, match="line 2: is not valid JSON")


def test_it_rejects_invalid_utf8(tmp_path, capsys):
    bad = json.dumps(meta_row(), ensure_ascii=False).encode().replace(b"cough", b"c\xffugh") + b"\n"
    _import_fails(tmp_path, capsys, bad, match="line 2: is not valid UTF-8 (byte 0xff")


def test_it_rejects_a_rubric_that_contradicts_the_catalogue(tmp_path, capsys):
    ConsensusCriterion.objects.create(cluster=OTHER_CATEGORY, text="The catalogue's own wording.", axis="completeness")
    _import_fails(
        tmp_path,
        capsys,
        meta_row("p-2", "c-2", OTHER_CATEGORY),
        match=f"line 2, field rubric: differs from the catalogue's text for {OTHER_CATEGORY}",
    )


def test_it_rejects_one_physician_labelling_an_item_twice_differently(tmp_path, capsys):
    _import_fails(
        tmp_path,
        capsys,
        meta_row(labels=(True, False, False), physicians=(0, 1, 0)),
        match="line 2, field binary_labels[2]: physician",
    )


def test_it_rejects_a_prompt_that_differs_from_the_stored_conversation(tmp_path, capsys):
    Conversation.objects.create(prompt_id="p-2", messages=[{"content": "Another question.", "role": "user"}])
    _import_fails(
        tmp_path, capsys, meta_row("p-2", "c-2"), match="line 2, field prompt: prompt_id 'p-2' is already stored"
    )


def test_it_rejects_a_completion_whose_text_differs_from_the_stored_response(tmp_path, capsys):
    path = tmp_path / "first.jsonl"
    write(path, meta_row("p-2", "c-2"))
    _import(path)
    _import_fails(
        tmp_path,
        capsys,
        meta_row("p-2", "c-2", OTHER_CATEGORY, completion="Something else entirely."),
        match="line 2, field completion: completion_id 'c-2' is already stored with another text",
    )


def test_it_rejects_lines_that_disagree_on_a_completion_or_a_rubric(tmp_path, capsys):
    report = _import_fails(
        tmp_path,
        capsys,
        meta_row("good", "good-c", OTHER_CATEGORY, completion="Not what line 1 said."),
        meta_row("p-3", "c-3", CATEGORY, rubric="Another wording of the same category."),
        match="line 2, field completion: differs from line 1, which has the same completion_id 'good-c'",
    )
    assert f"line 3, field rubric: differs from line 1, which has the same category '{CATEGORY}'" in report


def test_it_rejects_an_item_that_appears_twice(tmp_path, capsys):
    _import_fails(
        tmp_path,
        capsys,
        meta_row("good", "good-c", physicians=(2, 3)),
        match="line 2, field category: this (completion_id, category) item already appears on line 1",
    )


def test_it_never_overwrites_a_stored_label(tmp_path, capsys):
    path = tmp_path / "first.jsonl"
    write(path, meta_row("p-2", "c-2", labels=(True, True)))
    _import(path)
    _import_fails(
        tmp_path,
        capsys,
        meta_row("p-2", "c-2", labels=(True, False)),
        match="line 2, field binary_labels[1]: physician",
    )


def test_the_real_sample_imports_and_reimports_unchanged():
    path = sample_file("meta_eval_sample.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    _import(path)
    assert PhysicianLabel.objects.count() == sum(len(r["binary_labels"]) for r in rows)
    assert Response.objects.count() == len({r["completion_id"] for r in rows})
    assert ConsensusCriterion.objects.count() == len({r["category"] for r in rows})
    assert Conversation.objects.get().canary == rows[0]["canary"]
    before = _counts()
    _import(path)
    assert _counts() == before


# --- label-only rows (a third-party reduction keeps ids and labels only) --------------------


def label_only(row: dict, **extra) -> dict:
    kept = {k: v for k, v in row.items() if k not in ("prompt", "completion", "rubric", "canary")}
    return {"item_id": f"hb-{row['completion_id']}", "dataset": "healthbench", **kept, **extra}


def test_a_label_only_row_attaches_to_the_stored_conversation_and_response(tmp_path):
    full = tmp_path / "full.jsonl"
    write(full, meta_row("p-1", "c-1", labels=(True, False), physicians=(0, 1)))
    _import(full)
    before = {"conversations": Conversation.objects.count(), "responses": Response.objects.count()}
    reduced = tmp_path / "reduced.jsonl"
    write(reduced, label_only(meta_row("p-1", "c-1", category=OTHER_CATEGORY, labels=(True,), physicians=(2,))))
    ConsensusCriterion.objects.create(cluster=OTHER_CATEGORY, text=rubric(OTHER_CATEGORY), points=5)
    out, _ = _import(reduced)
    assert {"conversations": Conversation.objects.count(), "responses": Response.objects.count()} == before
    label = PhysicianLabel.objects.get(physician__anonymized_id=physician(2))
    assert label.criterion.consensus_criterion.cluster == OTHER_CATEGORY
    assert label.response.text.startswith("Response")
    assert "1 label-only rows (0 conversations and 0 responses stored without text)" in out


def test_label_only_items_of_unknown_conversations_are_kept_without_text(tmp_path):
    ConsensusCriterion.objects.create(cluster=CATEGORY, text=rubric(CATEGORY), points=5)
    path = tmp_path / "reduced.jsonl"
    write(path, label_only(meta_row("p-9", "c-9")))
    out, _ = _import(path)
    conversation = Conversation.objects.get(prompt_id="p-9")
    assert conversation.messages == []
    assert Response.objects.get(completion_id="c-9").text == ""
    # Never in meta-eval: a run on that subset would grade an empty conversation.
    assert set(conversation.subsets.values_list("name", flat=True)) == {"meta-eval-labels-only"}
    assert PhysicianLabel.objects.count() == 2
    assert "1 conversations and 1 responses stored without text" in out
    # The full file later brings the texts in.
    full = tmp_path / "full.jsonl"
    write(full, meta_row("p-9", "c-9"))
    out, _ = _import(full)
    assert Conversation.objects.get(prompt_id="p-9").messages != []
    assert Response.objects.get(completion_id="c-9").text.startswith("Response c-9")
    assert "2 stored texts filled in" in out
    assert PhysicianLabel.objects.count() == 2


def test_a_label_only_row_without_a_catalogued_criterion_says_what_is_missing(tmp_path, capsys):
    _import_fails(
        tmp_path,
        capsys,
        label_only(meta_row("p-2", "c-2", category=OTHER_CATEGORY)),
        match=f"line 2, field rubric: is missing and the consensus catalogue has no {OTHER_CATEGORY}",
    )


def test_the_public_labels_only_sample_imports_with_the_catalogue():
    catalogue = json.loads(sample_file("consensus_criteria.json").read_text())
    ConsensusCriterion.objects.bulk_create(
        ConsensusCriterion(
            cluster=c["cluster"], text=c["criterion"], points=c["points"], axis=c["axis"].removeprefix("axis:")
        )
        for c in catalogue
    )
    path = sample_file("meta_eval_labels_only_sample.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    _import(path)
    assert PhysicianLabel.objects.count() == sum(len(r["binary_labels"]) for r in rows)
    assert Response.objects.count() == len({r["completion_id"] for r in rows})
    before = _counts()
    _import(path)
    assert _counts() == before


def test_a_healthbench_file_fills_in_a_conversation_stored_without_text(tmp_path):
    ConsensusCriterion.objects.create(cluster=CATEGORY, text=rubric(CATEGORY), points=5)
    path = tmp_path / "reduced.jsonl"
    write(path, label_only(meta_row("p-9", "c-9")))
    _import(path)
    dataset = tmp_path / "dataset.jsonl"
    incoming = consensus_row("p-9")
    write_healthbench(dataset, incoming)
    call_command("import_healthbench", str(dataset), stdout=StringIO())
    conversation = Conversation.objects.get(prompt_id="p-9")
    assert conversation.messages == incoming["prompt"]
    assert conversation.example_tags == incoming["example_tags"]
