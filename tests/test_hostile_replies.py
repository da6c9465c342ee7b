"""Hostile replies over real HTTP, through a real worker (issue 28): each run ends, failed or
done, within the bound its test states, with its reason, and stores nothing the database
refuses (on PostgreSQL too, which refuses NUL and bytes that are not UTF-8)."""

import io

import pytest
from django.core.management import call_command

from grading.models import Grade, Run
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.test_worker_e2e import kill, start_worker, wait_for

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

END_SECONDS = 60  # from launch to the run's end, worker start-up included


def _launch(name: str, grader: str, source: str) -> Run:
    call_command(
        "grade", "--name", name, "--grader", grader, "--concurrency", "4", stdout=io.StringIO(), responses_from=source
    )
    return Run.objects.get(name=name)


def test_a_500_with_a_nul_and_bad_utf8_fails_the_run_with_its_reason(llm_server, tmp_path):
    llm_server.inject("nul_500", 10_000)
    imported_run(name="imported", conversations=2, samples=1, n_criteria=4)
    endpoint_on(llm_server, "hostile", timeout_seconds=5)
    log = tmp_path / "worker.log"
    worker = start_worker("nul", log, GRADING_FAILURE_STREAK="4")
    try:
        run = _launch("nul", "hostile", "imported")
        wait_for(
            lambda: Run.objects.get(id=run.id).status != Run.Status.RUNNING,
            timeout=END_SECONDS,
            what="the run to end",
            log=log,
        )
    finally:
        kill(worker, 15)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "upstream broke" in run.error
    assert "\x00" not in run.error
    assert "\ufffd" in run.error
    # It stopped on the streak: a handful of calls, never the endless re-queueing of a crash.
    assert llm_server.faults_served["nul_500"] <= 4 * 6
    stored = "".join(Grade.objects.filter(run=run).values_list("error", flat=True))
    assert "\x00" not in stored


def test_trickling_swollen_and_bomb_replies_fail_their_runs_and_a_healthy_run_beside_finishes(
    llm_server, make_llm_server, tmp_path
):
    imported_run(name="imported", conversations=2, samples=1, n_criteria=4)
    endpoint_on(llm_server, "healthy", timeout_seconds=3)
    for kind in ("trickle", "huge", "gzip_bomb"):
        server = make_llm_server()
        server.inject(kind, 10_000)
        endpoint_on(server, kind, timeout_seconds=3)
    from tests.llm_hostile import gzip_bomb

    gzip_bomb(1024 * 1024 * 1024)  # 1 GB inflated, made once before the clock starts
    log = tmp_path / "worker.log"
    worker = start_worker("bounds", log, GRADING_FAILURE_STREAK="3")
    try:
        runs = {kind: _launch(kind, kind, "imported") for kind in ("trickle", "huge", "gzip_bomb", "healthy")}
        wait_for(
            lambda: not Run.objects.filter(status=Run.Status.RUNNING).exists(),
            timeout=END_SECONDS,
            what="every run to end",
            log=log,
        )
    finally:
        kill(worker, 15)
    ended = {kind: Run.objects.get(id=run.id) for kind, run in runs.items()}
    assert ended["healthy"].status == Run.Status.DONE
    assert Grade.objects.filter(run=ended["healthy"], status=Grade.Status.GRADED).count() == 8
    assert ended["trickle"].status == Run.Status.FAILED
    assert "no answer within 3 s" in ended["trickle"].error
    for kind in ("huge", "gzip_bomb"):
        assert ended[kind].status == Run.Status.FAILED
        assert "reply too large" in ended[kind].error
