"""A downgrade that cannot keep what newer code stored refuses before it changes anything and
lists the rows: `migrate grading 0007` after a `grade --labelled` run used to undo 0016 and
then stop on a raw IntegrityError, half-downgraded."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.exceptions import IrreversibleError
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

from annotation.models import Conversation
from grading.models import CalibrationSample, GraderConfig, Run
from tests.grading_data import imported_run
from tests.migrating import migrate_to

pytestmark = pytest.mark.django_db(transaction=True)


def _applied() -> set[tuple[str, str]]:
    return set(MigrationRecorder(connection).applied_migrations())


def _labelled_run(name: str) -> Run:
    # Drawn with the earlier bootstrap, so that only the guard under test has a reason to refuse
    # (grading 0021 refuses to go back past a run drawn as the reference draws).
    return Run.objects.create(
        name=name,
        plan=Run.Plan.LABELLED,
        plan_rubric={},
        status=Run.Status.DONE,
        samples=1,
        total_items=0,
        bootstrap="shared",
    )


def _migrate(*args) -> None:
    call_command("migrate", *args, verbosity=0, stdout=StringIO())


def test_migrate_back_past_the_labelled_plan_refuses_before_anything_is_undone_and_lists_the_runs():
    _labelled_run("labelled-a")
    _labelled_run("labelled-b")
    Run.objects.create(name="imported", plan=Run.Plan.STORED, status=Run.Status.IMPORTED, samples=1, bootstrap="shared")
    before = _applied()
    with pytest.raises(CommandError) as refused:
        _migrate("grading", "0007_run_report_version")
    message = str(refused.value)
    assert message.startswith("Not migrating back: (grading 0015_run_plan_labelled) runs planned on the")
    assert "Run labelled-a, labelled-b." in message
    assert "imported" not in message
    assert message.endswith("Nothing was changed; migrate back again once they are dealt with.")
    assert _applied() == before, "no migration was undone"
    assert Run.objects.filter(plan=Run.Plan.LABELLED).count() == 2


def test_every_guard_on_the_plan_is_asked_at_once():
    _labelled_run("labelled-a")
    Conversation.objects.create(prompt_id="long-canary", messages=[{"role": "user", "content": "hi"}], canary="c" * 252)
    before = _applied()
    with pytest.raises(CommandError) as refused:
        _migrate("annotation", "0007_workflow")  # grading's migrations on annotation's go back first
    message = str(refused.value)
    assert "(grading 0015_run_plan_labelled)" in message
    assert "Run labelled-a." in message
    assert "(annotation 0008_text_limits) Conversation.canary holds values longer than the 200" in message
    assert "long-canary (252 characters)" in message
    assert _applied() == before


def test_the_guard_refuses_in_place_too_and_the_old_constraint_is_never_met_with_a_labelled_run():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    _labelled_run("labelled-a")
    try:
        # Without the migrate command (no pre_migrate): the later migrations are undone, then
        # 0015's guard stops before the older run_has_plan could fail on the run.
        with pytest.raises(IrreversibleError, match="runs planned on the physician-labelled items"):
            migrate_to([("grading", "0014_run_bootstrap")])
        assert ("grading", "0015_run_plan_labelled") in _applied()
        # Only the columns every schema on the way has (later migrations were undone).
        assert Run.objects.filter(name="labelled-a").values_list("plan", flat=True).get() == Run.Plan.LABELLED
    finally:
        migrate_to(leaves)


def test_with_no_labelled_run_the_downgrade_goes_through():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    Run.objects.create(name="imported", plan=Run.Plan.STORED, status=Run.Status.IMPORTED, samples=1, bootstrap="shared")
    try:
        _migrate("grading", "0014_run_bootstrap")
        assert ("grading", "0015_run_plan_labelled") not in _applied()
    finally:
        migrate_to(leaves)
    assert Run.objects.get(name="imported").plan == Run.Plan.STORED


def _batched_run() -> str:
    run = imported_run(name="batched", conversations=1, samples=1, n_criteria=2)
    Run.objects.filter(id=run.id).update(batch=True)
    return run.name


def _per_response_run() -> str:
    run = imported_run(name="per-response", conversations=1, samples=1, n_criteria=2)
    config = GraderConfig.objects.create(name="pr", model="m", grading_mode="per-response", criteria_per_call=20)
    Run.objects.filter(id=run.id).update(grader_config=config)
    return run.name


def _calibrated_run() -> str:
    run = imported_run(name="calibrated", conversations=1, samples=1, n_criteria=2)
    CalibrationSample.objects.create(run=run, size=2, seed=7)
    return run.name


def _physician_run() -> str:
    run = imported_run(name="physicians", conversations=1, samples=1, n_criteria=2)
    Run.objects.filter(id=run.id).update(physician_responses=True, policy_model="physician")
    return run.name


@pytest.mark.parametrize(
    ("make", "target", "guard", "why"),
    [
        (_batched_run, "0009_endpoint_system_message_grader_templates", "0010_provider_batches", "Batch API"),
        (_per_response_run, "0010_provider_batches", "0011_grading_modes", "graded per response"),
        (_calibrated_run, "0016_response_text_length", "0020_calibration_sample", "calibration samples"),
        (_physician_run, "0023_drift_versions", "0024_physician_response_source", "the physicians' responses"),
    ],
    ids=["batched", "per-response", "calibration", "physician-responses"],
)
def test_what_newer_code_stored_is_never_dropped_by_a_downgrade(make, target, guard, why):
    name = make()
    Run.objects.create(name="plain", plan=Run.Plan.STORED, status=Run.Status.IMPORTED, samples=1)
    before = _applied()
    with pytest.raises(CommandError) as refused:
        _migrate("grading", target)
    message = str(refused.value)
    assert message.startswith(f"Not migrating back: (grading {guard}) ")
    assert why in message
    assert message.count("(grading ") == 1
    assert f" {name}." in message
    assert "plain" not in message
    assert _applied() == before
