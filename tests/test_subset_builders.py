import pytest
from django.core.management import call_command

from annotation.models import Conversation, Subset
from annotation.services.subset_builders import (
    consensus_subset_build,
    filtered_conversations,
    subset_rebuild,
)
from annotation.services.subset_changes import subset_change_undo
from grading.reports.hard_subset import hardest_conversations
from tests.healthbench_rows import consensus_row, row, rubric_item, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(tmp_path):
    negative_only = row(
        "p-neg",
        rubrics=[rubric_item("Says hi.", 3), rubric_item("Bad advice.", -5, "accuracy", cluster="only_negative")],
    )
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"), consensus_row("p-2"), negative_only, consensus_row("p-3", theme="hedging"))
    call_command("import_healthbench", path)


def _ids(*prompt_ids):
    by_prompt = dict(Conversation.objects.values_list("prompt_id", "id"))
    return [by_prompt[p] for p in prompt_ids]


def _members(subset):
    return list(subset.members.order_by("id").values_list("conversation__prompt_id", flat=True))


def test_consensus_holds_conversations_with_a_positive_cluster_criterion(dataset):
    subset, added, removed = consensus_subset_build()
    assert subset.kind == Subset.Kind.CONSENSUS
    assert _members(subset) == ["p-2", "p-3"]
    assert (added, removed) == (2, 0)


def test_rebuilding_consensus_keeps_order_and_drops_what_no_longer_qualifies(dataset):
    subset, _, _ = consensus_subset_build()
    Conversation.objects.get(prompt_id="p-2").criteria.filter(level="cluster").update(points=-5)
    subset, added, removed = consensus_subset_build()
    assert _members(subset) == ["p-3"]
    assert (added, removed) == (0, 1)


def test_filters_pick_by_theme_and_cluster(dataset):
    assert [c.prompt_id for c in filtered_conversations(themes=["hedging"])] == ["p-1", "p-neg", "p-3"]
    assert [c.prompt_id for c in filtered_conversations(has_cluster=False)] == ["p-1"]
    assert [c.prompt_id for c in filtered_conversations(min_turns=3, themes=["emergency_referrals"])] == ["p-2"]


def test_a_rebuild_is_logged_and_undone_like_any_other_change(dataset):
    subset = Subset.objects.create(name="mine")
    assert subset_rebuild(subset=subset, conversation_ids=_ids("p-3", "p-1", "p-3"), action="first") == (2, 0)
    assert _members(subset) == ["p-3", "p-1"]
    assert subset_rebuild(subset=subset, conversation_ids=_ids("p-1", "p-2"), action="second") == (1, 1)
    assert _members(subset) == ["p-1", "p-2"]
    assert subset_rebuild(subset=subset, conversation_ids=_ids("p-1", "p-2"), action="unchanged") == (0, 0)
    assert list(subset.changes.order_by("id").values_list("action", flat=True)) == ["first", "second"]
    subset_change_undo(subset=subset)
    assert _members(subset) == ["p-3", "p-1"]


def test_hardest_takes_the_lowest_means_with_stable_ties():
    assert hardest_conversations({1: 0.5, 2: 0.1, 3: 0.1, 4: 0.9}, 3) == [2, 3, 1]


def _graded_run(name: str, scores: dict[str, list[bool]]) -> None:
    """A run whose responses meet the first criterion of each conversation as given."""
    from grading.models import Grade, Response, Run

    run = Run.objects.create(
        plan=Run.Plan.STORED, name=name, status=Run.Status.IMPORTED
    )  # its grade rows are the whole rubric
    for prompt_id, samples in scores.items():
        conversation = Conversation.objects.get(prompt_id=prompt_id)
        criterion = conversation.criteria.filter(points__gt=0).order_by("position").first()
        for index, met in enumerate(samples):
            response = Response.objects.create(conversation=conversation, text="r", sample_index=index)
            Grade.objects.create(
                run=run,
                response=response,
                criterion=criterion,
                criterion_text=criterion.text,
                points=criterion.points,
                tags=criterion.tags,
                met=met,
            )


def test_hard_takes_the_conversations_with_the_lowest_mean_over_the_chosen_runs(dataset):
    _graded_run("a", {"p-1": [True, True], "p-2": [False, True], "p-3": [False, False]})
    _graded_run("b", {"p-1": [True], "p-2": [False], "p-3": [True]})
    call_command("build_subset", "hard", runs=["a", "b"], n=2)
    # means: p-1 1.0, p-2 1/3, p-3 1/3 (ties by id)
    assert _members(Subset.objects.get(name="hard")) == ["p-2", "p-3"]
    call_command("build_subset", "hard", runs=["b"], n=1)
    assert _members(Subset.objects.get(name="hard")) == ["p-2"]


def test_hard_needs_known_runs(dataset):
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="no run named 'nope'"):
        call_command("build_subset", "hard", runs=["nope"])
    with pytest.raises(CommandError, match="needs --runs"):
        call_command("build_subset", "hard")


def test_hard_ranks_only_conversations_every_chosen_run_scored(dataset):
    from grading.models import Run
    from grading.reports.hard_subset import paired_conversation_mean_scores

    # p-3 is the worst in a, but b never graded it: it cannot be compared, so it is left out.
    _graded_run("a", {"p-1": [True], "p-2": [False], "p-3": [False]})
    _graded_run("b", {"p-1": [True], "p-2": [True]})
    means, left_out = paired_conversation_mean_scores(list(Run.objects.filter(name__in=["a", "b"]).order_by("name")))
    assert left_out == 1
    assert {Conversation.objects.get(pk=c).prompt_id: m for c, m in means.items()} == {"p-1": 1.0, "p-2": 0.5}
    call_command("build_subset", "hard", runs=["a", "b"], n=1)
    assert _members(Subset.objects.get(name="hard")) == ["p-2"]
