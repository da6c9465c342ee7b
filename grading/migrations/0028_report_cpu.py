# Issue 32: new runs draw their bootstrap from one draw per resample (Run.bootstrap "one-draw"),
# and a grade's tag list gets a hash kept by PostgreSQL (Grade.tags_key) that a report groups by,
# read with the report's other columns from the (run, response) index alone. Adding the stored
# column rewrites the grade table once: about 30 s per million grades on a busy 2-core machine.

from django.db import migrations, models
from django.db.migrations.exceptions import IrreversibleError

import grading.models.runs


def refuse_back(apps, schema_editor) -> None:
    # The earlier code cannot draw a "one-draw" bootstrap: its reports of these runs would fail.
    run = apps.get_model("grading", "Run")
    names = list(run.objects.filter(bootstrap="one-draw").order_by("pk").values_list("name", flat=True)[:21])
    if names:
        more = " and more" if len(names) > 20 else ""
        raise IrreversibleError(
            "Not migrating back: these runs draw their bootstrap stds from one draw per resample "
            f"(Run.bootstrap 'one-draw'), which the earlier code cannot compute: {', '.join(names[:20])}{more}. "
            "Nothing was changed. Delete them (or export them with export_run first), then migrate back again."
        )


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0024_physician_response_source"),
    ]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="bootstrap",
            field=models.CharField(
                choices=[
                    ("one-draw", "n of n with replacement, as the reference draws, from one draw per resample"),
                    ("multinomial", "n of n with replacement, as the reference draws"),
                    ("shared", "Poisson weights shared by every metric"),
                    ("per-metric", "one resampling per metric"),
                ],
                db_default="per-metric",
                default="one-draw",
                max_length=16,
            ),
        ),
        migrations.RemoveIndex(
            model_name="grade",
            name="grade_run_response",
        ),
        migrations.AddField(
            model_name="grade",
            name="tags_key",
            field=models.GeneratedField(
                db_persist=True, expression=grading.models.runs.TagsKey("tags"), output_field=models.BigIntegerField()
            ),
        ),
        migrations.AddIndex(
            model_name="grade",
            index=models.Index(
                fields=["run", "response"],
                include=("id", "points", "met", "reused", "tags_key"),
                name="grade_run_response_report",
            ),
        ),
        # Last, so that on the way back it refuses before anything is undone.
        migrations.RunPython(migrations.RunPython.noop, refuse_back),
    ]
