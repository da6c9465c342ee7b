"""A finished run's drift notice (grading.drift): counted from the run's stored planned rubric and
the conversations' rubric versions, never from its grades; only the runs over a conversation whose
criteria changed count again, and the counts are always rubric_drift's (from the grades)."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Conversation, Criterion, Physician
from annotation.services.rubric import criterion_create, criterion_delete, criterion_update
from grading.drift import rubric_drift_stored
from grading.models import Grade, Response, Run, RunRubric
from grading.pipeline.tasks import warm_report
from grading.plans import rubric_drift
from tests import healthbench_rows as rows
from tests.grading_data import conversation_with_rubric
from tests.migrating import migrate_to
from tests.people import person

pytestmark = pytest.mark.django_db


def _run(name: str, conversations: list[Conversation]) -> Run:
    """A finished (imported) run: two responses per conversation, graded on its live rubric."""
    run = Run.objects.create(plan=Run.Plan.STORED, name=name, status=Run.Status.IMPORTED, samples=2)
    grades: list[Grade] = []
    for conversation in conversations:
        for k in range(2):
            response = Response.objects.create(conversation=conversation, text=f"Reply {k}.", sample_index=k)
            grades.extend(
                Grade(
                    run=run,
                    response=response,
                    criterion=c,
                    position=c.position,
                    criterion_text=c.text,
                    points=c.points,
                    tags=c.tags,
                    met=k == 0,
                )
                for c in conversation.criteria.order_by("position")
            )
    Grade.objects.bulk_create(grades)
    return run


def _counts(run: Run) -> tuple[int, int, int]:
    drift = rubric_drift_stored(Run.objects.get(id=run.id))
    return drift.added, drift.edited, drift.deleted


def _from_grades(run: Run) -> tuple[int, int, int]:
    drift = rubric_drift(run)
    return drift.added, drift.edited, drift.deleted


def _no_grade_read(run: Run) -> tuple[tuple[int, int, int], int]:
    """The stored counts, checking that they read no grade; and the number of queries."""
    run = Run.objects.get(id=run.id)
    with CaptureQueriesContext(connection) as queries:
        drift = rubric_drift_stored(run)
    assert not [q["sql"] for q in queries.captured_queries if "grading_grade" in q["sql"]]
    return (drift.added, drift.edited, drift.deleted), len(queries.captured_queries)


@pytest.fixture
def two_runs(db):
    """Run "a" over conversations 0 and 1, run "b" over 2 and 3, "both" over all four; each
    run's drift baseline recorded."""
    conversations = [conversation_with_rubric(i, n_criteria=4) for i in range(4)]
    runs = {
        "a": _run("a", conversations[:2]),
        "b": _run("b", conversations[2:]),
        "both": _run("both", conversations),
    }
    for run in runs.values():
        assert _counts(run) == (0, 0, 0)
    return conversations, runs


@pytest.fixture
def curator(db) -> Physician:
    return Physician.objects.get(user=person("curator", Physician.Role.CURATOR))


def test_an_edit_on_one_conversation_shows_only_on_the_runs_over_it(two_runs, curator):
    conversations, runs = two_runs
    versions_b = list(RunRubric.objects.filter(run=runs["b"]).values_list("rubric_version", flat=True))
    criterion = conversations[0].criteria.order_by("position").first()
    criterion_update(
        physician=curator, criterion=criterion, text=criterion.text + " Edited.", points=2, axis="accuracy"
    )
    for name, expected in (("a", (0, 1, 0)), ("both", (0, 1, 0)), ("b", (0, 0, 0))):
        counts, _ = _no_grade_read(runs[name])
        assert counts == expected == _from_grades(runs[name]), name
    # Run b's rows were not counted again: none of its conversations moved.
    assert list(RunRubric.objects.filter(run=runs["b"]).values_list("rubric_version", flat=True)) == versions_b
    # Once counted, a page asks one query of the run's rows.
    for run in runs.values():
        assert _no_grade_read(run)[1] == 1


def test_additions_and_deletions_are_counted_like_the_grades_count_them(two_runs, curator):
    conversations, runs = two_runs
    criterion_create(
        physician=curator, conversation=conversations[1], text="Mentions need:guava.", points=3, axis="accuracy"
    )
    criterion_create(
        physician=curator, conversation=conversations[3], text="Mentions need:lychee.", points=2, axis="accuracy"
    )
    criterion_delete(physician=curator, criterion=conversations[3].criteria.order_by("position").first())
    for name, expected in (("a", (1, 0, 0)), ("b", (1, 0, 1)), ("both", (2, 0, 1))):
        assert _no_grade_read(runs[name])[0] == expected == _from_grades(runs[name]), name
    # An edit undone by hand is no drift: the content is compared, not the version.
    added = Criterion.objects.get(text="Mentions need:guava.")
    criterion_delete(physician=curator, criterion=added)
    assert _no_grade_read(runs["a"])[0] == (0, 0, 0) == _from_grades(runs["a"])


def test_the_page_says_so_only_for_the_runs_over_the_edited_conversation(two_runs, curator):
    conversations, runs = two_runs
    client = Client()
    client.force_login(person("reader", Physician.Role.RESEARCHER))
    criterion = conversations[2].criteria.order_by("position").last()
    criterion_update(
        physician=curator, criterion=criterion, text=criterion.text + " Edited.", points=1, axis="accuracy"
    )
    pages = {name: client.get(reverse("report_detail", args=[run.code])).content.decode() for name, run in runs.items()}
    assert "1 criterion edited since this run" in pages["b"]
    assert "1 criterion edited since this run" in pages["both"]
    assert 'id="rubric-drift"' not in pages["a"]
    assert "rubric_changes=on" in pages["b"]


def test_a_run_recorded_before_reads_its_grades_once_then_never_again(db, curator):
    conversation = conversation_with_rubric(0, n_criteria=3)
    run = _run("old", [conversation])
    assert run.drift_baseline is None
    criterion_create(
        physician=curator, conversation=conversation, text="Mentions need:quince.", points=4, axis="accuracy"
    )
    assert _counts(run) == (1, 0, 0) == _from_grades(run)
    run.refresh_from_db()
    assert run.drift_baseline == {"version": run.report_version, "cluster": False}
    criterion_create(
        physician=curator, conversation=conversation, text="Mentions need:durian.", points=4, axis="accuracy"
    )
    assert _no_grade_read(run)[0] == (2, 0, 0) == _from_grades(run)
    # A resume (new grades) moves the report version on: the planned rubric is read again.
    Run.objects.filter(id=run.id).update(report_version=run.report_version + 1)
    assert _counts(run) == (2, 0, 0)
    assert Run.objects.get(id=run.id).drift_baseline == {"version": run.report_version + 1, "cluster": False}


def test_an_import_that_adds_or_refreshes_criteria_moves_only_its_conversations(db, tmp_path):
    first = rows.row("imp-1", rubrics=[rows.rubric_item("Suggests rest.", 5), rows.rubric_item("Mentions fluids.", 3)])
    second = rows.row("imp-2", rubrics=[rows.rubric_item("Suggests a doctor.", 4)])
    dataset = tmp_path / "first.jsonl"
    rows.write(dataset, first, second)
    call_command("import_healthbench", str(dataset), stdout=StringIO())
    one, two = (Conversation.objects.get(prompt_id=p) for p in ("imp-1", "imp-2"))
    run_one, run_two = _run("one", [one]), _run("two", [two])
    assert _counts(run_one) == _counts(run_two) == (0, 0, 0)
    versions = {c.id: c.rubric_version for c in (one, two)}
    # The same rows again, imp-1 with a criterion more: merged into the stored rubric.
    grown = dict(first, rubrics=[*first["rubrics"], rows.rubric_item("Asks about fever.", 2)])
    again = tmp_path / "again.jsonl"
    rows.write(again, grown, second)
    call_command("import_healthbench", str(again), stdout=StringIO())
    one.refresh_from_db()
    two.refresh_from_db()
    assert one.rubric_version > versions[one.id]
    assert two.rubric_version == versions[two.id]
    assert _no_grade_read(run_one)[0] == (1, 0, 0) == _from_grades(run_one)
    assert _no_grade_read(run_two)[0] == (0, 0, 0) == _from_grades(run_two)


def test_a_labelled_run_has_no_drift(db):
    run = Run.objects.create(plan=Run.Plan.LABELLED, name="labelled", status=Run.Status.DONE, plan_rubric={})
    assert _counts(run) == (0, 0, 0)
    assert not RunRubric.objects.filter(run=run).exists()


def test_the_runs_end_records_the_baseline_so_no_page_reads_a_grade(db, curator):
    conversation = conversation_with_rubric(0, n_criteria=3)
    run = _run("ended", [conversation])
    warm_report(run.id)  # what the run's end queues
    run.refresh_from_db()
    assert run.drift_baseline == {"version": run.report_version, "cluster": False}
    assert RunRubric.objects.filter(run=run).count() == 1
    assert _no_grade_read(run) == ((0, 0, 0), 1)


def test_an_edit_in_the_admin_moves_the_version(db, client):
    conversation = conversation_with_rubric(0, n_criteria=2)
    run = _run("admin", [conversation])
    assert _counts(run) == (0, 0, 0)
    admin = person("root", Physician.Role.CURATOR)
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    criterion = conversation.criteria.order_by("position").first()
    url = reverse("admin:annotation_criterion_delete", args=[criterion.id])
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert _no_grade_read(run)[0] == (0, 0, 1) == _from_grades(run)


@pytest.mark.django_db(transaction=True)
def test_the_migration_starts_each_rubric_at_its_number_of_edits():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    curator = Physician.objects.get(user=person("curator", Physician.Role.CURATOR))
    edited, untouched = conversation_with_rubric(0, n_criteria=2), conversation_with_rubric(1, n_criteria=2)
    criterion_create(physician=curator, conversation=edited, text="Mentions need:guava.", points=3, axis="accuracy")
    criterion_delete(physician=curator, criterion=edited.criteria.order_by("position")[0])
    try:
        migrate_to([("annotation", "0009_physician_drafts_cant_judge_guidelines")])
    finally:
        migrate_to(leaves)
    versions = dict(Conversation.objects.values_list("id", "rubric_version"))
    assert versions == {edited.id: 2, untouched.id: 0}
