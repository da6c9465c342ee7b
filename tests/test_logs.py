"""Logs: one line per record with time and level (JSON objects with LOG_FORMAT=json), and a
grading run that an operator can follow by its name: launch, batches, end, failure classes."""

import json
import logging
import os
import subprocess
import sys

import pytest

from grading.models import Run
from grading.pipeline import client as llm
from grading.pipeline.batches import batch_run
from grading.pipeline.failure_log import failure_class
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from healthbench_web.log_format import JsonFormatter, TextFormatter
from tests.conftest import REPO
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run

pytest_plugins = ["tests.llm_server"]


def _record(message: str, *args, exc_info=None, **extra) -> logging.LogRecord:
    record = logging.LogRecord("grading.pipeline.runs", logging.WARNING, __file__, 1, message, args, exc_info)
    record.__dict__.update(extra)
    return record


def test_the_json_format_writes_one_object_per_line_with_time_level_and_extras():
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("run %r failed", "nightly", exc_info=sys.exc_info(), run="nightly", batch=3)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "grading.pipeline.runs"
    assert entry["message"] == "run 'nightly' failed"
    assert entry["run"] == "nightly"
    assert entry["batch"] == 3
    assert entry["time"].endswith("Z")
    assert "T" in entry["time"]
    assert "ValueError: boom" in entry["exception"]


def test_the_text_format_keeps_a_typed_name_on_one_line():
    line = TextFormatter().format(_record("run %s launched", "evil\n2026-01-01 ERROR forged", run="evil\nname"))
    first = line.splitlines()[0]
    assert line == first, "a newline in a run's name must not start a new log line"
    assert " WARNING grading.pipeline.runs: run evil\\n2026-01-01 ERROR forged launched" in first
    assert 'run="evil\\nname"' in first


def test_log_format_json_configures_every_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(LOG_FORMAT="json", LOG_LEVEL="info", VAR_DIR=str(tmp_path))
    code = "import logging; logging.getLogger('grading').info('hello', extra={'run': 'r1'})"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stderr.strip().splitlines()[-1])
    assert entry["message"] == "hello"
    assert entry["level"] == "INFO"
    assert entry["run"] == "r1"


@pytest.mark.parametrize(
    ("error", "name"),
    [
        ("HTTP 429: slow down (gave up after 5 attempts)", "HTTP 429"),
        ("no answer within 2 s (gave up after 5 attempts)", "timeout"),
        ("connection failed: refused (gave up after 5 attempts)", "connection"),
        ("unreadable answer 3 times: no JSON object", "unreadable answer"),
        ("the grader refused: “I can't help with that.”", "grader refusal"),
        ("the grader's answer was cut off at 400 output tokens", "cut off"),
        ("the endpoint's answer is empty: the answer holds no text (finish_reason stop)", "empty answer"),
        ("the endpoint's answer is not a completion: KeyError 'choices' (gave up after 6)", "not a completion"),
        ("something new", "other"),
    ],
)
def test_failures_are_classed_by_what_went_wrong(error, name):
    assert failure_class(error) == name


@pytest.mark.django_db
def test_a_run_logs_its_launch_batches_end_and_each_failure_class_once(llm_server, caplog, monkeypatch):
    monkeypatch.setattr(llm, "DEFAULT_RETRY", llm.RetryPolicy(base_delay=0.01, max_delay=0.02, max_attempts=2))
    # Criterion 0 always answers 500, criterion 1 never answers in JSON: two failure classes,
    # each met by every response of the run.
    source = imported_run(conversations=3, samples=2, n_criteria=3, faults={0: "500:99", 1: "malformed:99"})
    grader = endpoint_on(llm_server)
    caplog.set_level(logging.INFO)
    run = run_launch(spec=RunRequest(name="nightly", grader=grader, concurrency=2, responses_from=source))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE

    mine = [r for r in caplog.records if getattr(r, "run", None) == "nightly"]
    messages = [r.getMessage() for r in mine]
    assert messages[0].startswith("run 'nightly' launched: 18 grades in 1 batches")
    assert any(m.startswith("run 'nightly' batch 0 claimed") for m in messages)
    assert any(m == "run 'nightly' batch 0 done" for m in messages)
    assert any(m.startswith("run 'nightly' ended done: 6 graded, 12 failed of 18") for m in messages)
    failures = [r for r in mine if getattr(r, "failure", None)]
    assert sorted(r.failure for r in failures) == ["HTTP 500", "unreadable answer"]
    assert all(r.levelname == "WARNING" and "grader calls fail" in r.getMessage() for r in failures)
