"""Compress large text columns with lz4 on PostgreSQL (import speed; pglz is several times slower)."""

from django.db import migrations

COLUMNS = [
    ("annotation_conversation", "messages"),
    ("annotation_idealresponse", "text"),
    ("annotation_idealresponse", "reference_responses"),
]


def use_lz4(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)")
        if cursor.fetchone() is None:
            return  # a server built without lz4 keeps its default
        for table, column in COLUMNS:
            cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION lz4')


class Migration(migrations.Migration):
    dependencies = [("annotation", "0002_initial")]
    operations = [migrations.RunPython(use_lz4, migrations.RunPython.noop)]
