"""The data migration: each distinct grader configuration of the runs made before endpoints
becomes an endpoint; configurations that differ only in their prompt template share one."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrating import migrate_to

BEFORE = [("grading", "0002_grading_pipeline")]
AFTER = [("grading", "0004_endpoints_from_grader_configs")]


@pytest.mark.django_db(transaction=True)
def test_existing_configurations_become_endpoints_and_keep_working():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old = migrate_to(BEFORE)
        GraderConfig = old.get_model("grading", "GraderConfig")
        common = {"base_url": "http://10.0.0.5:8000/v1", "model": "llama", "api_key_env": "", "temperature": 0.0}
        first = GraderConfig.objects.create(name="a", prompt_template="one <<conversation>> <<rubric_item>>", **common)
        second = GraderConfig.objects.create(name="b", prompt_template="two <<conversation>> <<rubric_item>>", **common)
        leaky = GraderConfig.objects.create(name="c", model="gpt-4.1", api_key_env="SECRET_KEY", max_tokens=99)

        new = migrate_to(AFTER)
        Endpoint = new.get_model("grading", "Endpoint")
        Config = new.get_model("grading", "GraderConfig")
        assert sorted(Endpoint.objects.values_list("name", flat=True)) == ["gpt-4.1 @ openai", "llama @ 10.0.0.5:8000"]
        local = Endpoint.objects.get(model="llama")
        assert (local.base_url, local.key_variable, local.temperature) == ("http://10.0.0.5:8000/v1", "", 0.0)
        assert Config.objects.get(id=first.id).endpoint_id == Config.objects.get(id=second.id).endpoint_id == local.id
        copied = Endpoint.objects.get(model="gpt-4.1")
        # Copied as it was: the admin flags it, and launch and worker refuse it, until changed.
        assert (copied.key_variable, copied.max_output_tokens) == ("SECRET_KEY", 99)
        assert Config.objects.get(id=leaky.id).endpoint_name == "gpt-4.1 @ openai"
    finally:
        migrate_to(leaves)
