"""A worker of another database on the same queues (another deployment sharing the Redis and
the queue prefix) takes a batch's message: the batch waits queued with no claim and no message
(issue 28, item 8). The worker now says so in an error that names the run and the setting to
change, CELERY_QUEUE_PREFIX (grading/pipeline/foreign.py); before, it logged "not claimed" at
INFO level."""

import io
import os
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.db import connection

from grading.models import Run, RunBatch
from healthbench_web.celery import app
from tests.conftest import REPO
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.test_worker_e2e import kill, start_worker, wait_for

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def foreign_database(tmp_path):
    """The name of another database, empty and migrated, for the foreign worker."""
    if connection.vendor == "postgresql":
        name = f"{connection.settings_dict['NAME']}_foreign"
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
            cursor.execute(f'CREATE DATABASE "{name}"')
    else:
        name = str(tmp_path / "foreign.sqlite3")
    env = {**os.environ, "DATABASE_NAME": name}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    yield name
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_worker_of_another_database_says_so_and_names_the_setting(llm_server, tmp_path, foreign_database):
    imported_run(name="imported", conversations=4, samples=1, n_criteria=3)
    endpoint_on(llm_server, "grader")
    log = tmp_path / "foreign.log"
    # A message an earlier test left on the shared queues would be the foreign worker's first,
    # and its one error a minute would name that run instead of this one.
    app.control.purge()
    foreign = start_worker("foreign", log, DATABASE_NAME=foreign_database)
    try:
        call_command(
            "grade", "--name", "regrade", "--grader", "grader", stdout=io.StringIO(), responses_from="imported"
        )
        run = Run.objects.get(name="regrade")
        wait_for(
            lambda: "not in this worker's database" in log.read_text(),
            timeout=90,
            what="the foreign worker to take the message",
            log=log,
        )
    finally:
        kill(foreign, 15)
    # Item 8's signature: queued, never claimed, and no message left for it.
    assert list(run.batches.values_list("status", "claims")) == [(RunBatch.Status.QUEUED, 0)]
    assert f"of run {run.code} is not in this worker's database" in log.read_text()
    assert "CELERY_QUEUE_PREFIX" in log.read_text()
