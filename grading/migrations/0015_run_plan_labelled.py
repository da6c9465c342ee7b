"""A run's plan may be the physician-labelled items: each labelled response on the consensus
criteria it was labelled on, frozen in Run.plan_rubric at launch."""

from django.db import migrations, models

from healthbench_web.migration_guards import refuse_while_rows


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0009_physician_drafts_cant_judge_guidelines"),
        ("grading", "0014_run_bootstrap"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="run",
            name="run_has_plan",
        ),
        migrations.AlterField(
            model_name="run",
            name="plan",
            field=models.CharField(
                choices=[
                    ("subset_version", "the rubrics of a frozen subset version"),
                    ("source_run", "the items the source run graded"),
                    ("rubric_changes", "the criteria added or edited since the source run"),
                    ("labelled", "the physician-labelled items"),
                    ("stored", "its stored grades"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("plan", "subset_version"), ("responses_from__isnull", True), ("subset_version__isnull", False)
                    ),
                    models.Q(
                        ("plan", "source_run"), ("responses_from__isnull", False), ("subset_version__isnull", True)
                    ),
                    models.Q(
                        ("plan", "rubric_changes"),
                        ("plan_rubric__isnull", False),
                        ("responses_from__isnull", False),
                        ("subset_version__isnull", True),
                    ),
                    models.Q(
                        ("plan", "labelled"),
                        ("plan_rubric__isnull", False),
                        ("responses_from__isnull", True),
                        ("subset_version__isnull", True),
                    ),
                    models.Q(("plan", "stored"), ("responses_from__isnull", True), ("subset_version__isnull", True)),
                    _connector="OR",
                ),
                name="run_has_plan",
            ),
        ),
        # Migrating back puts the older run_has_plan back, which no run planned on the labelled
        # items satisfies: refuse while there is one, before anything is undone.
        refuse_while_rows(
            "grading",
            "Run",
            where={"plan": "labelled"},
            shown_by="name",
            why="runs planned on the physician-labelled items (grade --labelled), which the earlier schema cannot hold",
            fix="Delete them (export_run NAME keeps their grades in a file first).",
        ),
    ]
