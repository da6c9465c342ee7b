"""Each distinct grader or policy configuration of the runs made before endpoints existed
becomes an endpoint, and its configurations (now the runs' snapshots) point at it.

"Distinct" means the same call settings (URL, model, key variable, temperature, output
tokens, timeout, limits); the prompt template is the run's, not the endpoint's. Names read
"model @ host" with a number when two differ. Key variables are copied as they were: one that
is not on ENDPOINT_KEY_VARIABLES is flagged in the admin and refused at launch and by the
worker, so no run can use it until a curator picks an allowed one.
"""

from urllib.parse import urlsplit

from django.db import migrations

CALL_FIELDS = (
    "base_url",
    "model",
    "api_key_env",
    "temperature",
    "max_tokens",
    "timeout_seconds",
    "requests_per_minute",
    "tokens_per_minute",
)


def forward(apps, schema_editor):
    GraderConfig = apps.get_model("grading", "GraderConfig")
    Endpoint = apps.get_model("grading", "Endpoint")
    taken = set(Endpoint.objects.values_list("name", flat=True))
    made: dict[tuple, object] = {}
    for config in GraderConfig.objects.filter(endpoint__isnull=True).order_by("id"):
        key = tuple(getattr(config, field) for field in CALL_FIELDS)
        endpoint = made.get(key)
        if endpoint is None:
            host = urlsplit(config.base_url).netloc or "openai"
            base = f"{config.model[:60]} @ {host[:30]}"
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base} ({n})"
            taken.add(name)
            endpoint = Endpoint.objects.create(
                name=name,
                base_url=config.base_url,
                model=config.model,
                key_variable=config.api_key_env,
                temperature=config.temperature,
                max_output_tokens=config.max_tokens,
                timeout_seconds=config.timeout_seconds,
                requests_per_minute=config.requests_per_minute,
                tokens_per_minute=config.tokens_per_minute,
                notes="Made from an existing grader configuration when endpoints were introduced.",
            )
            made[key] = endpoint
        config.endpoint = endpoint
        config.endpoint_name = endpoint.name
        config.save(update_fields=["endpoint", "endpoint_name"])


def backward(apps, schema_editor):
    # The snapshots keep every setting; the endpoints made here go with the link to them.
    GraderConfig = apps.get_model("grading", "GraderConfig")
    Endpoint = apps.get_model("grading", "Endpoint")
    made = Endpoint.objects.filter(notes__startswith="Made from an existing grader configuration")
    GraderConfig.objects.filter(endpoint__in=made).update(endpoint=None, endpoint_name="")
    made.delete()


class Migration(migrations.Migration):
    dependencies = [("grading", "0003_endpoints")]

    operations = [migrations.RunPython(forward, backward)]
