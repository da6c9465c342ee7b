from django.db import migrations

import annotation.fields


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0012_rubric_versions"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="professional",
            field=annotation.fields.JSONTextField(blank=True, null=True),
        ),
    ]
