"""End to end with real worker processes: a regrade through injected faults, its worker killed
with SIGKILL mid-run, another worker started; every grade must exist exactly once and the
report must equal the imported run's (whose grades the test server's grader agrees with).

Runs on the broker the settings name: Redis when REDIS_URL is set, else the filesystem
broker under VAR_DIR. The workers use the test database (DATABASE_NAME) and short leases,
so that the second worker's sweep takes over the killed worker's batches within seconds.
Do not run another worker on the same broker meanwhile: it would take these tasks.
"""

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.models import Count

from grading.models import Grade, Run, RunBatch
from grading.pipeline.progress import run_progress
from grading.pipeline.runs import GRADE_BATCH_TASK
from grading.reports.report import run_report
from healthbench_web.celery import app
from tests.conftest import REPO
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

LEASE_SECONDS = 3
# Each fault once per item, so that every grade ends graded and the score is the fault-free one.
FAULTS = {0: "500:1", 2: "429:1", 3: "malformed:1", 5: "slow:1", 6: "reset:1"}


def start_worker(name: str, log: Path, **settings_env: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_NAME": str(connection.settings_dict["NAME"]),
        "GRADING_LEASE_SECONDS": str(LEASE_SECONDS),
        "GRADING_SWEEP_SECONDS": "1",
        **settings_env,
    }
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "healthbench_web",
        "worker",
        "--concurrency",
        "2",
        "--hostname",
        f"{name}@%h",
        "--loglevel",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        # Both of this session's queues, by name, as a deployment's workers are started.
        "-Q",
        f"{settings.CELERY_GRADING_QUEUE},{settings.CELERY_SAMPLING_QUEUE}",
    ]
    # Its own process group, so that SIGKILL takes the pool's children too, as a crash would.
    return subprocess.Popen(
        command, cwd=REPO, env=env, start_new_session=True, stdout=log.open("ab"), stderr=subprocess.STDOUT
    )


def kill(worker: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(worker.pid, sig)
    except ProcessLookupError:
        return
    try:
        worker.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def wait_for(condition, *, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            batches = list(RunBatch.objects.values_list("number", "status", "claims", "failures", "items"))
            pytest.fail(f"timed out waiting for {what}; batches {batches}; worker log:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def test_a_killed_worker_loses_and_doubles_nothing(llm_server, tmp_path):
    llm_server.latency = 0.1
    llm_server.retry_after = 0.3
    llm_server.slow_seconds = 2.0
    source = imported_run(
        name="imported", conversations=8, samples=4, n_criteria=8, faults=FAULTS, faulty_conversations=3
    )
    endpoint_on(llm_server, "e2e", timeout_seconds=1)
    log = tmp_path / "workers.log"
    workers = [start_worker("first", log)]
    try:
        call_command(
            "grade",
            "--name",
            "again",
            "--grader",
            "e2e",
            "--concurrency",
            "8",
            stdout=io.StringIO(),
            responses_from="imported",
        )
        run = Run.objects.get(name="again")
        total = run.total_items
        assert total == 256

        wait_for(
            lambda: Grade.objects.filter(run=run).count() >= total // 4,
            timeout=30,
            what="a quarter of the grades",
            log=log,
        )
        kill(workers[0], signal.SIGKILL)
        assert Grade.objects.filter(run=run).count() < total, "the run ended before the kill: make it slower"
        # Its claimed batches now have no worker: only the lease and the sweep bring them back.
        assert RunBatch.objects.filter(run=run, status=RunBatch.Status.RUNNING).exists()

        workers.append(start_worker("second", log))
        wait_for(
            lambda: Run.objects.get(id=run.id).status != Run.Status.RUNNING, timeout=45, what="the run to end", log=log
        )
    finally:
        for worker in workers:
            kill(worker, signal.SIGTERM)

    run.refresh_from_db()
    assert run.status == Run.Status.DONE, log.read_text()[-4000:]
    grades = Grade.objects.filter(run=run)
    assert grades.count() == total
    assert not grades.values("response", "position").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert not grades.filter(status=Grade.Status.FAILED).exists()
    assert {"500", "429", "malformed", "slow", "reset"} <= set(llm_server.faults_served)
    # The same numbers; only the regrade knows its grader.
    assert run_report(run=run).data | {"grader": None} == run_report(run=source).data


def _take_off(queue: str) -> list[int]:
    """The batch ids waiting on `queue`, taken off it."""
    ids: list[int] = []
    with app.connection_for_write() as conn:
        waiting = conn.SimpleQueue(queue)
        try:
            while True:
                try:
                    message = waiting.get(timeout=2)
                except waiting.Empty:
                    return ids
                ids.append(message.payload[0][0])
                message.ack()
        finally:
            waiting.close()


def test_batches_an_older_release_left_on_the_default_queue_are_picked_up(llm_server, tmp_path):
    # Releases before the queue rename sent every task to Celery's default queue ("celery"; this
    # session's own name for it here). A run in flight at the upgrade must go on by itself.
    imported_run(name="imported", conversations=2, samples=1, n_criteria=3)
    endpoint_on(llm_server, "e2e")
    call_command("grade", "--name", "in-flight", "--grader", "e2e", responses_from="imported", stdout=io.StringIO())
    run = Run.objects.get(name="in-flight")
    ours = set(run.batches.values_list("id", flat=True))
    # Off today's queue (with whatever earlier tests of this session left there), and onto the
    # old one, as the older release queued them.
    assert ours <= set(_take_off(settings.CELERY_GRADING_QUEUE))
    for batch_id in sorted(ours):
        app.tasks[GRADE_BATCH_TASK].apply_async((batch_id,), queue=settings.CELERY_LEGACY_QUEUE)

    log = tmp_path / "worker.log"
    worker = start_worker("upgraded", log)  # listens on today's two queues only
    try:
        wait_for(
            lambda: Run.objects.get(id=run.id).status != Run.Status.RUNNING, timeout=45, what="the run to end", log=log
        )
    finally:
        kill(worker, signal.SIGTERM)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == run.total_items
    assert _take_off(settings.CELERY_LEGACY_QUEUE) == []


def test_each_grading_mode_grades_every_criterion_once_through_a_worker(llm_server, tmp_path):
    """Both modes on the same responses, through a real worker: each criterion graded exactly
    once, the per-response run's spoilt entries graded by calls of their own and counted,
    and both reports equal to the imported run's (whose verdicts the server agrees with)."""
    llm_server.latency = 0.02
    entries = {1: "missing", 4: "non_boolean"}
    source = imported_run(
        name="holdout", conversations=6, samples=2, n_criteria=7, entries=entries, faulty_conversations=2
    )
    endpoint_on(llm_server, "e2e")
    log = tmp_path / "workers.log"
    worker = start_worker("modes", log)
    try:
        for mode in ("per-criterion", "per-response"):
            call_command(
                "grade",
                "--name",
                mode,
                "--grader",
                "e2e",
                "--concurrency",
                "8",
                "--grading-mode",
                mode,
                stdout=io.StringIO(),
                responses_from="holdout",
            )
        wait_for(
            lambda: not Run.objects.filter(status=Run.Status.RUNNING).exists(), timeout=60, what="both runs", log=log
        )
    finally:
        kill(worker, signal.SIGTERM)
    for mode in ("per-criterion", "per-response"):
        run = Run.objects.get(name=mode)
        assert run.status == Run.Status.DONE, log.read_text()[-4000:]
        grades = Grade.objects.filter(run=run)
        assert grades.count() == run.total_items == 84
        assert not grades.values("response", "position").annotate(n=Count("id")).filter(n__gt=1).exists()
        numbers = {k: v for k, v in run_report(run=run).data.items() if k != "grader"}
        assert numbers == {k: v for k, v in run_report(run=source).data.items() if k != "grader"}
    per_response = Run.objects.get(name="per-response")
    assert run_progress(run=per_response).fallbacks == 2 * 2 * 2  # 2 spoilt entries in each of 4 responses
    assert run_progress(run=per_response).calls == 12 + 8
