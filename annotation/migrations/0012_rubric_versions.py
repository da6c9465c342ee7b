# Conversation.rubric_version (annotation.rubric_versions): moved on by every writer of criteria,
# read by a finished run's drift notice (grading.drift). Existing rows start at the number of
# edits their rubric recorded (CriterionEdit), so no two states of one rubric share a version.

from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce


def fill_versions(apps, schema_editor):
    Conversation = apps.get_model("annotation", "Conversation")
    CriterionEdit = apps.get_model("annotation", "CriterionEdit")
    edits = (
        CriterionEdit.objects.filter(conversation_id=OuterRef("id"))
        .order_by()
        .values("conversation_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    Conversation.objects.filter(id__in=CriterionEdit.objects.values("conversation_id")).update(
        rubric_version=Coalesce(Subquery(edits, output_field=models.PositiveIntegerField()), 0)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0011_rendered_markdown"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="rubric_version",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.RunPython(fill_versions, migrations.RunPython.noop, elidable=True),
    ]
