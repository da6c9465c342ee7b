"""Celery set-up for production: a sampling queue and a grading queue named from one prefix,
a Redis visibility timeout that outlasts every task, and worker processes that are recycled.

The queue tests read the messages back from the broker the settings name (this session's
filesystem folder, or Redis in the PostgreSQL + Redis run)."""

import os
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

from grading.models import RunBatch
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from healthbench_web.celery import app
from tests.conftest import REPO
from tests.endpoints import endpoint_on
from tests.grading_data import conversation_with_rubric, imported_run, subset_of

pytest_plugins = ["tests.llm_server"]


def _queued(queue: str) -> list[int]:
    """The batch ids of the grading tasks waiting on `queue` (taken off it)."""
    ids: list[int] = []
    with app.connection_for_read() as conn:
        messages = conn.SimpleQueue(queue)
        try:
            while True:
                try:
                    # Generous: on a loaded machine Redis' answer can take longer than half a second.
                    message = messages.get(timeout=2)
                except messages.Empty:
                    return ids
                args = message.payload[0] if isinstance(message.payload, list | tuple) else message.payload["args"]
                ids.append(args[0])
                message.ack()
        finally:
            messages.close()


def test_the_queues_are_named_from_one_prefix():
    prefix = settings.CELERY_QUEUE_PREFIX
    assert settings.CELERY_SAMPLING_QUEUE == f"{prefix}.sampling"
    assert settings.CELERY_GRADING_QUEUE == f"{prefix}.grading" == settings.CELERY_TASK_DEFAULT_QUEUE
    assert {q.name for q in settings.CELERY_TASK_QUEUES} == {f"{prefix}.sampling", f"{prefix}.grading"}
    # Each queue has its own routing key: one message never lands in both.
    assert {q.routing_key for q in settings.CELERY_TASK_QUEUES} == {f"{prefix}.sampling", f"{prefix}.grading"}


@pytest.mark.django_db
def test_a_regrade_goes_to_the_grading_queue_and_a_sampled_run_to_the_sampling_queue(
    llm_server, django_capture_on_commit_callbacks
):
    _queued(settings.CELERY_GRADING_QUEUE), _queued(settings.CELERY_SAMPLING_QUEUE)  # leftovers of other tests
    grader = endpoint_on(llm_server)
    policy = endpoint_on(llm_server, "test-policy", model="policy")
    source = imported_run(conversations=2, samples=1)
    subset = subset_of("mine", [conversation_with_rubric(10 + i, n_criteria=2) for i in range(2)])
    with django_capture_on_commit_callbacks(execute=True):
        regrade = run_launch(spec=RunRequest(name="regrade", grader=grader, responses_from=source))
        sampled = run_launch(spec=RunRequest(name="sampled", grader=grader, subset=subset, policy=policy, samples=2))
    grading, sampling = _queued(settings.CELERY_GRADING_QUEUE), _queued(settings.CELERY_SAMPLING_QUEUE)
    assert sorted(grading) == sorted(RunBatch.objects.filter(run=regrade).values_list("id", flat=True))
    assert sorted(sampling) == sorted(RunBatch.objects.filter(run=sampled).values_list("id", flat=True))


def _settings_of(tmp_path, code: str, **env) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    base.update(VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="healthbench_web.settings", **env)
    done = subprocess.run(
        [sys.executable, "-c", f"from django.conf import settings\n{code}"],
        cwd=REPO,
        env=base,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else done.stderr


def test_the_redis_visibility_timeout_outlasts_the_task_time_limit(tmp_path):
    show = "print(settings.CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout'], settings.CELERY_TASK_TIME_LIMIT)"
    assert _settings_of(tmp_path, show, REDIS_URL="redis://127.0.0.1:6379/0") == "660 600"
    assert _settings_of(tmp_path, show, REDIS_URL="redis://127.0.0.1:6379/0", CELERY_TASK_TIME_LIMIT="120") == "180 120"
    refused = _settings_of(
        tmp_path, show, REDIS_URL="redis://127.0.0.1:6379/0", CELERY_VISIBILITY_TIMEOUT="300", SECRET_KEY="x"
    )
    assert "CELERY_VISIBILITY_TIMEOUT=300 is below the minimum of 620" in refused


def test_worker_processes_are_recycled_by_task_count_and_memory(tmp_path):
    show = "print(settings.CELERY_WORKER_MAX_TASKS_PER_CHILD, settings.CELERY_WORKER_MAX_MEMORY_PER_CHILD)"
    assert _settings_of(tmp_path, show) == "100 1048576"
    assert _settings_of(tmp_path, show, CELERY_WORKER_MAX_MEMORY_MB="512", SECRET_KEY=secrets.token_urlsafe(8)) == (
        "100 524288"
    )
