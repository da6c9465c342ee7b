import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0009_physician_drafts_cant_judge_guidelines"),
    ]

    operations = [
        migrations.CreateModel(
            name="TaskEvent",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "kind",
                    models.CharField(
                        choices=[("open", "Open"), ("draft", "Draft"), ("answer", "Answer")], max_length=8
                    ),
                ),
                ("at", models.DateTimeField(default=django.utils.timezone.now)),
                ("sign_warnings", models.PositiveSmallIntegerField(default=0)),
                (
                    "assignment",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="annotation.assignment",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["assignment", "at"], name="task_event_timeline")],
            },
        ),
    ]
