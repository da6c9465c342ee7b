import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import ConsensusCriterion, Conversation, Criterion, IdealResponse, Subset, SubsetMember
from tests.healthbench_rows import consensus_row, cut_to_cluster, row, rubric_item, write

pytest_plugins = ["tests.llm_server"]
pytestmark = pytest.mark.django_db


def _counts() -> tuple:
    return (
        Conversation.objects.count(),
        Criterion.objects.count(),
        ConsensusCriterion.objects.count(),
        IdealResponse.objects.count(),
        SubsetMember.objects.count(),
    )


def _export(subset: str, tmp_path) -> list[str]:
    out = tmp_path / f"{subset}-export.jsonl"
    call_command("export_healthbench", subset=subset, out=out)
    return out.read_text().splitlines()


def test_it_imports_a_row_and_exports_it_unchanged(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"), consensus_row("p-2"))
    call_command("import_healthbench", path)
    assert _export("all", tmp_path) == path.read_text().splitlines()


def test_cluster_items_become_attached_consensus_criteria(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, consensus_row("p-2"))
    call_command("import_healthbench", path)
    entry = ConsensusCriterion.objects.get(cluster="cluster:emergency_behaviour")
    assert (entry.points, entry.axis, entry.theme) == (5, "completeness", "emergency_referrals")
    attached = Criterion.objects.get(consensus_criterion=entry)
    assert attached.level == "cluster"
    assert attached.conversation.prompt_id == "p-2"
    assert Criterion.objects.filter(level="example").count() == 2


def test_ideal_completions_become_an_ideal_response_with_its_references(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, consensus_row("p-2"))
    call_command("import_healthbench", path)
    ideal = IdealResponse.objects.get()
    assert ideal.group == "Group 2"
    assert ideal.condition == IdealResponse.Condition.WITH_REFERENCE
    assert ideal.reference_responses == ["Ref A", "Ref B", "Ref C", "Ref D"]


def test_every_conversation_joins_all_and_the_named_subset(tmp_path):
    path = tmp_path / "hard.jsonl"
    write(path, row("p-1"), row("p-2"))
    call_command("import_healthbench", path, subset="hard")
    assert Subset.objects.get(name="hard").kind == Subset.Kind.HARD
    assert Subset.objects.get(name="all").conversations.count() == 2
    assert Subset.objects.get(name="hard").conversations.count() == 2


def test_reimporting_the_same_file_changes_nothing(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"), consensus_row("p-2"))
    call_command("import_healthbench", path, subset="mine")
    before = _counts()
    stamps = list(Criterion.objects.order_by("id").values_list("id", "position", "updated"))
    call_command("import_healthbench", path, subset="mine")
    assert _counts() == before
    assert list(Criterion.objects.order_by("id").values_list("id", "position", "updated")) == stamps


def test_a_repeated_criterion_is_kept_twice_and_never_doubled(tmp_path):
    twice = rubric_item("Avoids jargon.", 4, "communication_quality")
    path = tmp_path / "main.jsonl"
    write(path, row("p-1", rubrics=[twice, rubric_item("Gives a dose.", 5), twice]))
    call_command("import_healthbench", path)
    call_command("import_healthbench", path)
    assert Criterion.objects.filter(text="Avoids jargon.").count() == 2
    assert json.loads(_export("all", tmp_path)[0])["rubrics"][2] == twice


def test_consensus_row_after_its_main_row_adds_nothing(tmp_path):
    main, consensus = tmp_path / "main.jsonl", tmp_path / "consensus.jsonl"
    write(main, consensus_row("p-2"), row("p-1"))
    write(consensus, cut_to_cluster(consensus_row("p-2")))
    call_command("import_healthbench", main)
    before = _counts()[:4]
    call_command("import_healthbench", consensus, subset="consensus")
    assert _counts()[:4] == before
    assert _export("all", tmp_path) == main.read_text().splitlines()
    assert _export("consensus", tmp_path) == consensus.read_text().splitlines()


def test_main_row_after_its_consensus_row_fills_in_the_rubric_in_file_order(tmp_path):
    main, consensus = tmp_path / "main.jsonl", tmp_path / "consensus.jsonl"
    write(consensus, cut_to_cluster(consensus_row("p-2")))
    write(main, consensus_row("p-2"))
    call_command("import_healthbench", consensus, subset="consensus")
    call_command("import_healthbench", main)
    assert Criterion.objects.count() == 4
    assert _export("all", tmp_path) == main.read_text().splitlines()
    assert _export("consensus", tmp_path) == consensus.read_text().splitlines()


def test_a_hard_row_is_the_main_row_and_merges_to_nothing_new(tmp_path):
    main, hard = tmp_path / "main.jsonl", tmp_path / "hard.jsonl"
    write(main, row("p-1"), row("p-2"))
    write(hard, row("p-2"))
    call_command("import_healthbench", main)
    call_command("import_healthbench", hard, subset="hard")
    assert Criterion.objects.count() == 6
    assert _export("hard", tmp_path) == hard.read_text().splitlines()


def test_a_row_that_disagrees_with_the_stored_conversation_is_refused(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write(first, row("p-1"))
    changed = row("p-1")
    changed["prompt"][0]["content"] = "Something else entirely."
    write(second, row("p-9"), changed)
    call_command("import_healthbench", first)
    before = _counts()
    with pytest.raises(CommandError):
        call_command("import_healthbench", second)
    assert _counts() == before


def test_a_row_without_canary_exports_without_canary(tmp_path):
    data = row("p-1")
    del data["canary"]
    path = tmp_path / "main.jsonl"
    write(path, data)
    call_command("import_healthbench", path)
    assert _export("all", tmp_path) == path.read_text().splitlines()


def test_export_of_an_unknown_subset_names_the_known_ones(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"))
    call_command("import_healthbench", path)
    with pytest.raises(CommandError, match=r"no subset named 'nope' .*all"):
        call_command("export_healthbench", subset="nope")


def test_a_bad_subset_name_is_refused(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"))
    with pytest.raises(CommandError, match="subset name"):
        call_command("import_healthbench", path, subset="Bad Name!")
    assert _counts() == (0, 0, 0, 0, 0)


def test_a_dataset_row_completes_a_conversation_first_seen_in_a_meta_eval_file(tmp_path):
    from tests.metaeval_rows import CATEGORY, MESSAGES, meta_row, rubric

    meta = tmp_path / "meta.jsonl"
    write(meta, meta_row("p-9"))
    call_command("import_meta_eval", meta)
    data = row(
        "p-9",
        prompt=MESSAGES,
        example_tags=["theme:hedging", "physician_agreed_category:hedges"],
        rubrics=[
            rubric_item("Says when to see a doctor.", 7),
            rubric_item(rubric(CATEGORY), 5, "accuracy", cluster=CATEGORY[8:]),
        ],
    )
    main = tmp_path / "main.jsonl"
    write(main, data)
    call_command("import_healthbench", main)
    call_command("import_healthbench", main)
    conversation = Conversation.objects.get(prompt_id="p-9")
    assert conversation.theme == "hedging"
    assert conversation.canary == data["canary"]
    assert conversation.criteria.filter(level="cluster").count() == 1
    assert ConsensusCriterion.objects.get(cluster=CATEGORY).axis == "accuracy"
    assert _export("all", tmp_path) == main.read_text().splitlines()


def test_a_consensus_file_is_recognised_by_its_content_whatever_its_subset_is_called(tmp_path, llm_server):
    from grading.pipeline.estimate import plan_estimate, run_plan
    from grading.pipeline.run_request import RunRequest
    from tests.endpoints import endpoint_on

    main, consensus = tmp_path / "main.jsonl", tmp_path / "cons5.jsonl"
    write(main, consensus_row("p-2"), row("p-1"))
    write(consensus, cut_to_cluster(consensus_row("p-2")))
    call_command("import_healthbench", main)
    out = StringIO()
    call_command("import_healthbench", consensus, subset="cons5", stdout=out, stderr=out)
    assert "imported as a Consensus subset" in out.getvalue()
    subset = Subset.objects.get(name="cons5")
    assert subset.kind == Subset.Kind.CONSENSUS
    # A run on it grades the two cluster criteria only, not the whole rubric of four.
    spec = RunRequest(
        name="r", grader=endpoint_on(llm_server), policy=endpoint_on(llm_server, "policy"), subset=subset, samples=1
    )
    assert run_plan(spec).grades == 2
    assert "Criteria graded: the level:cluster criteria only (cons5 is a Consensus subset)." in (
        plan_estimate(spec, run_plan(spec)).lines()
    )
    # The main file under another name stays a custom subset, and says nothing.
    out = StringIO()
    call_command("import_healthbench", main, subset="mine", stdout=out, stderr=out)
    assert "Consensus" not in out.getvalue()
    assert Subset.objects.get(name="mine").kind == Subset.Kind.CUSTOM


def test_a_main_file_imported_as_consensus_is_said_to_be_one(tmp_path):
    main = tmp_path / "main.jsonl"
    write(main, consensus_row("p-2"))
    out = StringIO()
    call_command("import_healthbench", main, subset="consensus", stdout=out, stderr=out)
    assert "the file is not a Consensus file" in out.getvalue()
