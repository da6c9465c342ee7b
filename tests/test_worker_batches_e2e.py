"""A batched run end to end with real worker processes: its provider batches sent to the test
server's Batch API, the worker killed with SIGKILL while they are in progress and some are
being stored, another worker started. Every criterion must be graded exactly once, no
provider batch created twice, and the report must equal the imported run's.

Same set-up and caveats as tests/test_worker_e2e.py (the broker the settings name, the test
database, short leases; no other worker on the same broker meanwhile)."""

import io
import signal
import time
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db.models import Count

from grading.models import Endpoint, Grade, ProviderBatch, Run
from grading.reports.report import run_report
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.test_worker_e2e import kill, start_worker, wait_for

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Each re-asked once: an unreadable answer, and one cut off at the output limit.
FAULTS = {1: "malformed:1", 4: "verbose:1"}


@pytest.mark.parametrize("mode", ["per-criterion", "per-response"])
def test_a_worker_killed_during_a_batched_run_loses_and_doubles_nothing(llm_server, settings, tmp_path, mode):
    settings.GRADING_BATCHED_RUN_UNIT = 64  # four RunBatches, each its own provider batch
    desk = llm_server.batches
    desk.validating_seconds = 0.2
    # About two seconds a batch (64 lines per criterion, 8 per response), so that the kill
    # finds some in progress.
    desk.line_seconds = 0.03 if mode == "per-criterion" else 0.25
    desk.paused.set()
    source = imported_run(
        name="imported", conversations=8, samples=4, n_criteria=8, faults=FAULTS, faulty_conversations=4
    )
    endpoint_on(llm_server, "batcher", max_output_tokens=120, batch_discount=Decimal("0.5"))
    assert Endpoint.objects.filter(name="batcher").exists()
    log = tmp_path / "workers.log"
    poll = {"GRADING_BATCH_POLL_SECONDS": "0.3"}
    workers = [start_worker("first", log, **poll)]
    try:
        call_command(
            "grade",
            "--name",
            "batched",
            "--grader",
            "batcher",
            "--responses-from",
            "imported",
            "--batch",
            "--grading-mode",
            mode,
            stdout=io.StringIO(),
        )
        run = Run.objects.get(name="batched")
        assert run.total_items == 256
        assert run.batches.count() == 4

        rows = ProviderBatch.objects.filter(run=run)
        wait_for(lambda: rows.exclude(batch_id="").count() == 4, timeout=30, what="four provider batches", log=log)
        desk.paused.clear()
        wait_for(lambda: rows.filter(collected=True).exists(), timeout=30, what="a provider batch stored", log=log)
        kill(workers[0], signal.SIGKILL)
        assert Grade.objects.filter(run=run).count() < run.total_items, "the run ended before the kill: slow it"

        workers.append(start_worker("second", log, **poll))
        started = time.monotonic()
        wait_for(
            lambda: Run.objects.get(id=run.id).status != Run.Status.RUNNING, timeout=90, what="the run to end", log=log
        )
        print(f"the second worker finished the run in {time.monotonic() - started:.1f} s")
    finally:
        for worker in workers:
            kill(worker, signal.SIGTERM)

    run.refresh_from_db()
    assert run.status == Run.Status.DONE, log.read_text()[-4000:]
    grades = Grade.objects.filter(run=run)
    assert grades.count() == run.total_items
    assert not grades.values("response", "position").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert not grades.filter(status=Grade.Status.FAILED).exists()
    assert not grades.filter(batched=False).exists()
    # No provider batch twice: every one the server made is a row here, each collected once.
    rows = ProviderBatch.objects.filter(run=run)
    assert desk.created == rows.count() == len(set(rows.values_list("batch_id", flat=True)))
    # Re-asks in later rounds (per response, an answer about 8 criteria also outgrows 120 tokens).
    assert {0, 1} <= set(rows.values_list("round", flat=True))
    if mode == "per-criterion":
        assert llm_server.faults_served["malformed"] == 16
        assert llm_server.faults_served["verbose"] == 16
    else:  # a chunk meets the first of its markers: one unreadable answer per faulty response
        assert llm_server.faults_served["malformed"] == 16
        assert set(grades.values_list("mode", flat=True)) == {mode}
    assert run_report(run=run).data | {"grader": None} == run_report(run=source).data
