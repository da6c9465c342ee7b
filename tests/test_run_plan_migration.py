"""Migration 0012: every run stored before plans gets one, so an upgraded database keeps working."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrating import migrate_to

BEFORE = [("grading", "0011_grading_modes")]
AFTER = [("grading", "0012_run_plan")]


@pytest.mark.django_db(transaction=True)
def test_runs_without_a_plan_get_one_from_what_they_hold():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old = migrate_to(BEFORE)
        Run = old.get_model("grading", "Run")
        Subset = old.get_model("annotation", "Subset")
        SubsetVersion = old.get_model("annotation", "SubsetVersion")
        subset = Subset.objects.create(name="mine")
        version = SubsetVersion.objects.create(subset=subset, number=1, content_hash="0" * 64, snapshot=[])
        on_version = Run.objects.create(name="on-version", status="done", subset=subset, subset_version=version)
        imported = Run.objects.create(name="imported", status="imported")
        regrade = Run.objects.create(name="regrade", status="done", responses_from=imported)
        legacy = Run.objects.create(name="legacy", status="done", subset=subset)
        demo = Run.objects.create(name="demo-run", status="done")

        new = migrate_to(AFTER)
        plans = dict(new.get_model("grading", "Run").objects.values_list("name", "plan"))
        assert plans == {
            on_version.name: "subset_version",
            imported.name: "stored",
            regrade.name: "source_run",
            legacy.name: "stored",
            demo.name: "stored",
        }
    finally:
        migrate_to(leaves)
