"""Run reports computed once per progress step and shared through the cache (Redis when
REDIS_URL is set, which the PostgreSQL + Redis run of the suite uses).

A progress step is a move of Run.report_version: every twentieth of a run's batches done,
its end, a cancel, a resume. Between steps every process reads the same cached report."""

import threading

import pytest
from django.core.cache import cache
from django.db.models import F
from django.utils import timezone

from grading.models import Run, RunBatch
from grading.pipeline.batches import batch_run
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.pipeline.runs import REPORT_STEPS, run_cancel, run_progress_step, run_resume
from grading.reports import report as report_module
from grading.reports.report import report_cache_key, run_report_cached
from healthbench_web import shared_cache
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]


@pytest.fixture
def computed(monkeypatch) -> list[int]:
    """The versions run_report computed, in order."""
    calls: list[int] = []
    real = report_module.run_report

    def counting(*, run, seed):
        calls.append(Run.objects.values_list("report_version", flat=True).get(id=run.id))
        return real(run=run, seed=seed)

    monkeypatch.setattr(report_module, "run_report", counting)
    return calls


def _bump(run: Run) -> Run:
    Run.objects.filter(id=run.id).update(report_version=F("report_version") + 1)
    run.refresh_from_db()
    return run


def test_a_finished_report_is_computed_once_and_then_read_from_the_cache(computed):
    run = imported_run(conversations=3, samples=2)
    first = run_report_cached(run=run)
    again = run_report_cached(run=Run.objects.get(id=run.id))  # as another request would load it
    assert computed == [0]
    assert again.data == first.data
    assert again.ranked_response_ids.tolist() == first.ranked_response_ids.tolist()


def test_a_new_version_is_computed_again_and_each_seed_has_its_own_entry(computed):
    run = imported_run(conversations=3, samples=2)
    run_report_cached(run=run)
    run_report_cached(run=_bump(run))
    run_report_cached(run=run, seed=7)
    run_report_cached(run=run, seed=None)  # unseeded: never cached
    run_report_cached(run=run, seed=None)
    assert computed == [0, 1, 1, 1, 1]


def test_an_active_run_gets_the_previous_step_at_once_while_another_process_computes(computed):
    run = imported_run(conversations=3, samples=2)
    Run.objects.filter(id=run.id).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    old = run_report_cached(run=run)
    run = _bump(run)
    # Another process holds the lock of version 1, as it would while computing it.
    cache.add(f"{report_cache_key(run=run, seed=0)}:lock:v1", 1, 60)
    assert run_report_cached(run=run) is not None
    assert computed == [0], "served the previous step instead of computing (or waiting for) the new one"
    assert run_report_cached(run=run).data == old.data


def test_a_finished_run_waits_for_the_process_computing_its_report_instead_of_computing_it_too(computed):
    run = imported_run(conversations=3, samples=2)
    run_report_cached(run=run)
    run = _bump(run)
    key = report_cache_key(run=run, seed=0)
    cache.add(f"{key}:lock:v1", 1, 60)
    other = report_module.run_report(run=run, seed=0)  # what the other process computes
    computed.clear()

    def other_process_finishes():
        cache.set(f"{key}:v1", other)
        cache.delete(f"{key}:lock:v1")

    timer = threading.Timer(0.3, other_process_finishes)
    timer.start()
    try:
        assert run_report_cached(run=run).data == other.data
    finally:
        timer.cancel()
    assert computed == []


def test_a_broken_cache_costs_a_computation_not_the_page(settings, computed):
    run = imported_run(conversations=2, samples=1)
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    assert run_report_cached(run=run).data["counts"]["examples"] == 2
    assert computed == [0]


def test_a_run_moves_its_report_version_a_bounded_number_of_times_as_its_batches_finish():
    run = imported_run(conversations=1, samples=1)
    now = timezone.now()
    batches = RunBatch.objects.bulk_create(
        [RunBatch(run=run, number=n, items=1, touched=now) for n in range(3 * REPORT_STEPS)]
    )
    for batch in batches:
        RunBatch.objects.filter(id=batch.id).update(status=RunBatch.Status.DONE)
        run_progress_step(run_id=run.id)
    run.refresh_from_db()
    assert run.report_version == REPORT_STEPS


def test_a_graded_run_moves_its_version_as_it_ends_and_when_resumed(llm_server, computed):
    source = imported_run(conversations=4, samples=2)
    run = run_launch(
        spec=RunRequest(name="again", grader=endpoint_on(llm_server), concurrency=2, responses_from=source)
    )
    running = run_report_cached(run=run)
    assert running.data["counts"]["grades"] == 0
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    # Each finished batch (fewer than REPORT_STEPS of them) was a step, and the end one more.
    assert run.report_version == run.batches.count() + 1
    assert run_report_cached(run=run).data["counts"]["grades"] == run.total_items
    version = run.report_version
    run_resume(run=run)
    assert run.report_version > version


def test_cancelling_a_run_moves_its_version():
    run = imported_run(conversations=1, samples=1)
    Run.objects.filter(id=run.id).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    assert run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.report_version == 1


def test_the_newest_version_pointer_never_moves_back():
    key = "test-pointer:" + timezone.now().isoformat()
    assert shared_cache.once_per_version(key, 3, lambda: "three") == "three"
    assert shared_cache.once_per_version(key, 2, lambda: "two") == "two"
    assert cache.get(f"{key}:latest") == 3
