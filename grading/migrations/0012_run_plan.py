"""Every run gets a plan: what it set out to grade, fixed for good.

A run on a frozen subset version keeps that version; a re-grade keeps its source run's items;
every other run recorded before plans existed (imported runs, the demo run, runs of old
releases) is planned on its stored grades, so its report keeps the items it holds and no
longer counts criteria added to its conversations since."""

from django.db import migrations, models

import annotation.fields


def plan_existing_runs(apps, schema_editor):
    Run = apps.get_model("grading", "Run")
    Run.objects.filter(subset_version__isnull=False, responses_from__isnull=True).update(plan="subset_version")
    Run.objects.filter(responses_from__isnull=False, subset_version__isnull=True).update(plan="source_run")
    Run.objects.filter(subset_version__isnull=True, responses_from__isnull=True).update(plan="stored")


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0009_physician_drafts_cant_judge_guidelines"),
        ("grading", "0011_grading_modes"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="plan",
            field=models.CharField(
                choices=[
                    ("subset_version", "the rubrics of a frozen subset version"),
                    ("source_run", "the items the source run graded"),
                    ("rubric_changes", "the criteria added or edited since the source run"),
                    ("stored", "its stored grades"),
                ],
                default="stored",
                max_length=16,
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="run",
            name="plan_rubric",
            field=annotation.fields.CleanJSONField(blank=True, null=True),
        ),
        migrations.RunPython(plan_existing_runs, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(plan="subset_version", responses_from__isnull=True, subset_version__isnull=False),
                    models.Q(plan="source_run", responses_from__isnull=False, subset_version__isnull=True),
                    models.Q(
                        plan="rubric_changes",
                        plan_rubric__isnull=False,
                        responses_from__isnull=False,
                        subset_version__isnull=True,
                    ),
                    models.Q(plan="stored", responses_from__isnull=True, subset_version__isnull=True),
                    _connector="OR",
                ),
                name="run_has_plan",
            ),
        ),
    ]
