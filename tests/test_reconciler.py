"""The reconciler (grading/pipeline/reconcile.py): a batch that waits without a message is
published again, once per period, and a duplicate message is harmless. On Redis it reads the
broker and leaves alone a batch whose message is there; through a real worker, a run whose
messages were all lost ends done."""

import io
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from grading.models import Grade, Run, RunBatch
from grading.pipeline.batches import batch_claim
from grading.pipeline.reconcile import batches_reconcile, batches_with_messages
from grading.pipeline.runs import batches_queue
from healthbench_web.celery import app
from tests.conftest import REPO
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.test_worker_e2e import kill, start_worker, wait_for

pytest_plugins = ["tests.llm_server"]
pytestmark = pytest.mark.django_db(transaction=True)

ON_REDIS = settings.CELERY_BROKER_URL.startswith("redis://")


@pytest.fixture(autouse=True)
def empty_queues():
    app.control.purge()
    yield
    app.control.purge()


def launched(llm_server, name: str = "regrade") -> Run:
    """A run launched with no worker running: its batches queued, their messages in the broker."""
    if not Run.objects.filter(name="imported").exists():
        imported_run(name="imported", conversations=4, samples=1, n_criteria=3)
        endpoint_on(llm_server, "grader")
    call_command("grade", "--name", name, "--grader", "grader", stdout=io.StringIO(), responses_from="imported")
    return Run.objects.get(name=name)


def age(run: Run, seconds: float) -> None:
    run.batches.update(touched=timezone.now() - timedelta(seconds=seconds))


def test_a_queued_batch_whose_message_was_lost_is_published_again_once_per_period(llm_server):
    run = launched(llm_server)
    app.control.purge()  # the messages are lost
    age(run, settings.GRADING_RECONCILE_SECONDS + 5)
    ids = set(run.batches.values_list("id", flat=True))
    assert set(batches_reconcile()) == ids
    if ON_REDIS:
        assert batches_with_messages() == ids
    # Published now: the next sweep within the period leaves them alone.
    assert batches_reconcile() == []


def test_a_batch_younger_than_the_bound_is_left_alone(llm_server):
    run = launched(llm_server)
    app.control.purge()
    age(run, settings.GRADING_RECONCILE_SECONDS - 10)
    assert batches_reconcile() == []


@pytest.mark.skipif(not ON_REDIS, reason="reads the broker's messages on Redis only (REDIS_URL)")
def test_a_batch_whose_message_is_in_the_broker_is_not_published_twice(llm_server):
    run = launched(llm_server)
    ids = set(run.batches.values_list("id", flat=True))
    assert batches_with_messages() == ids
    age(run, settings.GRADING_RECONCILE_SECONDS + 5)
    assert batches_reconcile() == []


def test_a_batch_handed_back_while_the_broker_was_down_is_published_again(llm_server):
    # Claimed once, handed back (no lease), its new message never published: the outage case.
    run = launched(llm_server)
    app.control.purge()
    claim = batch_claim(batch_id=run.batches.first().id)
    assert claim is not None
    claim.hand_back(error="ConnectionError: Redis went away")
    run.batches.exclude(id=claim.batch.id).update(status=RunBatch.Status.DONE)
    age(run, settings.GRADING_RECONCILE_SECONDS + 5)
    assert batches_reconcile() == [claim.batch.id]
    claim.batch.refresh_from_db()
    assert claim.batch.status == RunBatch.Status.QUEUED
    assert claim.batch.claims == 1


def test_a_duplicate_message_is_harmless_only_one_claim_wins(llm_server):
    run = launched(llm_server)
    batch = run.batches.first()
    batches_queue([batch.id])  # a second message for the same batch
    first, second = batch_claim(batch_id=batch.id), batch_claim(batch_id=batch.id)
    assert first is not None
    assert second is None


def test_a_batch_of_a_run_that_is_not_running_is_left_alone(llm_server):
    run = launched(llm_server)
    app.control.purge()
    Run.objects.filter(id=run.id).update(status=Run.Status.CANCELLED)
    age(run, settings.GRADING_RECONCILE_SECONDS + 5)
    assert batches_reconcile() == []


@pytest.mark.worker
def test_a_run_whose_messages_were_all_lost_ends_done_through_a_worker(llm_server, tmp_path):
    # As after a Redis outage or a lost publish: the batches are queued, the broker is empty.
    run = launched(llm_server)
    app.control.purge()
    log = tmp_path / "worker.log"
    worker = start_worker("reconcile", log, GRADING_RECONCILE_SECONDS="2", GRADING_SWEEP_SECONDS="1")
    try:
        # Start-up, a 2 s bound, a 1 s sweep and a few seconds of grading.
        wait_for(
            lambda: Run.objects.get(id=run.id).status != Run.Status.RUNNING, timeout=45, what="the run to end", log=log
        )
    finally:
        kill(worker, 15)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert "published again" in log.read_text()


def _redis(port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return server
        except OSError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)


OUTAGE_SECONDS = 5
END_AFTER_OUTAGE_SECONDS = 60


@pytest.mark.worker
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_a_redis_outage_mid_run_strands_no_batch(llm_server, tmp_path):
    # A Redis of this test's own, killed mid-run and started again empty (no persistence):
    # every message is gone, and batches handed back meanwhile could not be published.
    # 96 grades two at a time at 0.2 s: about 10 s, so that the run is still going when the
    # test (polling on a machine that may be busy) sees its first grades and kills Redis.
    llm_server.latency = 0.2
    imported_run(name="imported", conversations=12, samples=2, n_criteria=4)
    endpoint_on(llm_server, "grader")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    redis = _redis(port)
    broker = {"REDIS_URL": f"redis://127.0.0.1:{port}/0", "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0"}
    log = tmp_path / "worker.log"
    worker = start_worker(
        "outage", log, GRADING_RECONCILE_SECONDS="3", GRADING_SWEEP_SECONDS="1", GRADING_LEASE_SECONDS="3", **broker
    )
    env = {**os.environ, "DATABASE_NAME": str(connection.settings_dict["NAME"]), **broker}
    try:
        launch = [
            "grade",
            "--name",
            "outage",
            "--grader",
            "grader",
            "--responses-from",
            "imported",
            "--concurrency",
            "2",
        ]
        subprocess.run([sys.executable, "manage.py", *launch], cwd=REPO, env=env, check=True, capture_output=True)
        run = Run.objects.get(name="outage")
        wait_for(lambda: Grade.objects.filter(run=run).exists(), timeout=30, what="the first grades", log=log)
        redis.kill()
        redis.wait()
        assert Run.objects.get(id=run.id).status == Run.Status.RUNNING, "the run ended before the outage"
        time.sleep(OUTAGE_SECONDS)
        redis = _redis(port)
        wait_for(
            lambda: Run.objects.get(id=run.id).status != Run.Status.RUNNING,
            timeout=END_AFTER_OUTAGE_SECONDS,
            what="the run to end after the outage",
            log=log,
        )
    finally:
        kill(worker, 15)
        redis.kill()
        redis.wait()
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, log.read_text()[-3000:]
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == run.total_items
    # The broker came back empty: the batches went on because the reconciler published them again.
    assert "published again" in log.read_text()
