"""The round trip on the real public rows beside the repository (skipped when absent)."""

import json

import pytest
from django.core.management import call_command

from annotation.models import Conversation, Criterion
from tests.conftest import sample_file

pytestmark = pytest.mark.django_db


def _rows(path) -> list[dict]:
    return [json.loads(text) for text in path.read_text().splitlines() if text.strip()]


def _import_all_three():
    call_command("import_healthbench", sample_file("eval_sample.jsonl"))
    call_command("import_healthbench", sample_file("hard_sample.jsonl"), subset="hard")
    call_command("import_healthbench", sample_file("consensus_sample.jsonl"), subset="consensus")


def _export(subset, tmp_path):
    out = tmp_path / f"{subset}.jsonl"
    call_command("export_healthbench", subset=subset, out=out)
    return out


def test_hard_and_consensus_exports_are_byte_identical_to_the_files(tmp_path):
    _import_all_three()
    for subset, name in [("hard", "hard_sample.jsonl"), ("consensus", "consensus_sample.jsonl")]:
        assert _export(subset, tmp_path).read_bytes() == sample_file(name).read_bytes()


def test_the_main_sample_exports_byte_identical_to_the_file(tmp_path):
    call_command("import_healthbench", sample_file("eval_sample.jsonl"), subset="main")
    assert _export("main", tmp_path).read_bytes() == sample_file("eval_sample.jsonl").read_bytes()


def test_every_main_and_hard_row_comes_back_equal_from_all(tmp_path):
    _import_all_three()
    exported = {r["prompt_id"]: r for r in _rows(_export("all", tmp_path))}
    for name in ("eval_sample.jsonl", "hard_sample.jsonl"):
        for original in _rows(sample_file(name)):
            assert exported[original["prompt_id"]] == original


def test_consensus_first_then_main_gives_the_same_rubrics(tmp_path):
    call_command("import_healthbench", sample_file("consensus_sample.jsonl"), subset="consensus")
    call_command("import_healthbench", sample_file("eval_sample.jsonl"))
    exported = {r["prompt_id"]: r for r in _rows(_export("all", tmp_path))}
    for original in _rows(sample_file("eval_sample.jsonl")):
        assert exported[original["prompt_id"]] == original
    assert _export("consensus", tmp_path).read_bytes() == sample_file("consensus_sample.jsonl").read_bytes()


def test_importing_the_samples_twice_changes_nothing():
    _import_all_three()
    before = (Conversation.objects.count(), Criterion.objects.count())
    _import_all_three()
    assert (Conversation.objects.count(), Criterion.objects.count()) == before
    expected = len(
        {
            r["prompt_id"]
            for n in ("eval_sample.jsonl", "hard_sample.jsonl", "consensus_sample.jsonl")
            for r in _rows(sample_file(n))
        }
    )
    assert before[0] == expected
