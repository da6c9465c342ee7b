"""The HealthBench import reads its file a chunk of rows at a time, in one transaction.

Chunks are made small here so that the public sample files span many of them: the result must
be the one a single chunk gives, and a bad line after chunks were stored must leave nothing.
"""

import gc
import io

import pytest
from django.core.management import CommandError, call_command

from annotation.formats import importer
from annotation.models import ConsensusCriterion, Conversation, Criterion, IdealResponse, Subset, SubsetMember
from tests.conftest import sample_file
from tests.healthbench_rows import consensus_row, row, write

pytestmark = pytest.mark.django_db


def _state() -> tuple:
    return (
        list(Conversation.objects.order_by("id").values_list("prompt_id", "example_tags", "theme")),
        list(Criterion.objects.order_by("conversation_id", "position").values_list("text", "points", "level")),
        ConsensusCriterion.objects.count(),
        IdealResponse.objects.count(),
        list(SubsetMember.objects.order_by("id").values_list("subset__name", "conversation__prompt_id")),
    )


def _import_and_export(path, subset: str, tmp_path) -> list[str]:
    call_command("import_healthbench", path, subset=subset, stdout=io.StringIO())
    out = tmp_path / "export.jsonl"
    call_command("export_healthbench", subset=subset, out=out)
    return out.read_text().splitlines()


def test_the_public_samples_import_the_same_in_chunks_of_7_as_in_one(tmp_path, monkeypatch):
    eval_path, consensus_path = sample_file("eval_sample.jsonl"), sample_file("consensus_sample.jsonl")
    whole = (
        _import_and_export(eval_path, "main", tmp_path),
        _import_and_export(consensus_path, "cons", tmp_path),
        _state(),
    )
    for model in (SubsetMember, Subset, IdealResponse, Criterion, Conversation, ConsensusCriterion):
        model.objects.all().delete()
    monkeypatch.setattr(importer, "CHUNK_ROWS", 7)
    chunked = (
        _import_and_export(eval_path, "main", tmp_path),
        _import_and_export(consensus_path, "cons", tmp_path),
        _state(),
    )
    assert chunked == whole
    assert chunked[0] == eval_path.read_text().splitlines()
    # A Consensus file is told by all its rows, across chunks.
    assert Subset.objects.get(name="cons").kind == Subset.Kind.CONSENSUS


def test_a_bad_line_after_stored_chunks_leaves_nothing_and_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(importer, "CHUNK_ROWS", 2)
    path = tmp_path / "late.jsonl"
    rows = [row(f"p-{i}") for i in range(5)] + [consensus_row("p-c"), row("p-9", rubrics=[])]
    write(path, *rows)
    with pytest.raises(CommandError, match="the database is unchanged"):
        call_command("import_healthbench", path, subset="late", stdout=io.StringIO())
    assert "line 7, field rubrics: is empty" in capsys.readouterr().err
    assert Conversation.objects.count() == 0
    assert ConsensusCriterion.objects.count() == 0
    assert Subset.objects.count() == 0


def test_a_prompt_id_repeated_in_a_later_chunk_names_its_first_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(importer, "CHUNK_ROWS", 2)
    path = tmp_path / "twice.jsonl"
    write(path, row("p-1"), row("p-2"), row("p-3"), row("p-1"))
    with pytest.raises(CommandError):
        call_command("import_healthbench", path, stdout=io.StringIO())
    assert "line 4, field prompt_id: 'p-1' already appears on line 1" in capsys.readouterr().err
    assert Conversation.objects.count() == 0


def test_the_cycle_collector_is_on_again_after_an_import_and_left_off_when_it_was_off(tmp_path, monkeypatch):
    # The import pauses the collector per chunk (importer._no_cycle_collection).
    monkeypatch.setattr(importer, "CHUNK_ROWS", 2)
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    write(good, *[row(f"p-{i}") for i in range(5)])
    write(bad, row("q-1"), row("q-2"), row("q-3", rubrics=[]))
    assert gc.isenabled()
    call_command("import_healthbench", good, stdout=io.StringIO())
    assert gc.isenabled()
    with pytest.raises(CommandError):
        call_command("import_healthbench", bad, stdout=io.StringIO())
    assert gc.isenabled()
    gc.disable()
    try:
        call_command("import_healthbench", good, stdout=io.StringIO())
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert Conversation.objects.count() == 5


def test_criteria_numbered_by_the_database_follow_file_order(tmp_path):
    # Criteria, ideal responses and memberships are numbered as COPY reads them on PostgreSQL.
    path = tmp_path / "order.jsonl"
    write(path, *[row(f"p-{i}") for i in range(4)])
    call_command("import_healthbench", path, stdout=io.StringIO())
    by_id = list(Criterion.objects.order_by("id").values_list("conversation__prompt_id", "position"))
    assert by_id == sorted(by_id)
    assert len(by_id) == Criterion.objects.count() > 4
    members = list(SubsetMember.objects.order_by("id").values_list("conversation_id", flat=True))
    assert members == sorted(members)
    assert len(members) == 4
