# A finished run's drift notice kept like its report (grading.drift): Run.drift_baseline and one
# RunRubric row per conversation. Runs recorded before get theirs from their grades, once, the
# first time their page (or the warm_report task) asks.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0012_rubric_versions"),
        ("grading", "0022_endpoint_access"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="drift_baseline",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="RunRubric",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("rubric_version", models.PositiveIntegerField()),
                ("planned", models.JSONField(default=list)),
                ("added", models.PositiveIntegerField(default=0)),
                ("edited", models.PositiveIntegerField(default=0)),
                ("deleted", models.PositiveIntegerField(default=0)),
                (
                    "conversation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="annotation.conversation"
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="rubrics", to="grading.run"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("run", "conversation"), name="one_run_rubric_per_conversation")
                ],
            },
        ),
    ]
