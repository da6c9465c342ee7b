from django.db import migrations, models

from healthbench_web.migration_guards import refuse_while_rows


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0023_drift_versions"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="physician_responses",
            field=models.BooleanField(db_default=False, default=False),
        ),
        # Last, so that going back asks it first: the earlier code cannot resume these runs
        # (it finds no items for a run on a frozen version whose responses it did not sample).
        refuse_while_rows(
            "grading",
            "Run",
            where={"physician_responses": True},
            shown_by="name",
            why="these runs grade the physicians' responses, which the earlier code cannot resume or name",
            fix="Delete them (or export them with export_run first).",
        ),
    ]
