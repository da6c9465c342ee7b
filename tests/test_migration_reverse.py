"""Migrating back never cuts stored values: a reverse migration that would narrow a column
refuses and lists what is too long, and changes nothing."""

import pytest
from django.db import connection
from django.db.migrations.exceptions import IrreversibleError
from django.db.migrations.executor import MigrationExecutor

from annotation.models import Conversation
from tests.migrating import migrate_to

BACK = [("annotation", "0007_workflow")]
CANARY = "c" * 252  # the public files' canary strings are longer than the 200 characters of 0007


@pytest.mark.django_db(transaction=True)
def test_migrating_back_refuses_while_a_value_would_be_cut_and_lists_it():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    Conversation.objects.create(prompt_id="long-canary", messages=[{"role": "user", "content": "hi"}], canary=CANARY)
    Conversation.objects.create(prompt_id="short-canary", messages=[{"role": "user", "content": "hi"}], canary="ok")
    try:
        with pytest.raises(IrreversibleError) as refused:
            migrate_to(BACK)
        message = str(refused.value)
        assert "long-canary (252 characters)" in message
        assert "short-canary" not in message
        assert "Conversation.canary" in message
        assert "200" in message
        # Only the column read: the refused migration has already undone later ones (Conversation.rubric_version).
        assert Conversation.objects.values_list("canary", flat=True).get(prompt_id="long-canary") == CANARY, (
            "nothing was cut"
        )

        Conversation.objects.filter(prompt_id="long-canary").update(canary="c" * 200)
        migrate_to(BACK)  # with nothing too long, it goes back
    finally:
        migrate_to(leaves)
    assert Conversation.objects.get(prompt_id="long-canary").canary == "c" * 200
