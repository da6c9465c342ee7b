"""Keeps a test session apart from a running instance (pytest loads this with -p, before
Django reads its settings).

`scripts/run` serves from the same checkout with a worker on var/broker (or on Redis), and
another machine's worker may share the same Redis. Tests that start real workers would race
those for their tasks. So each session gets its own Celery queue prefix (its sampling and
grading queues are named from it) and its own filesystem broker folder; the workers a test
starts inherit both through the environment. Cache keys get a session prefix too, so that a
report or a throttle count of one session never answers another on a shared Redis. Test
databases are already per process (settings: TEST NAME with the pid).
"""

import os
import shutil
import socket
import uuid
from pathlib import Path

SESSION = f"test-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
_VAR_DIR = Path(os.environ.get("VAR_DIR", Path(__file__).resolve().parents[1] / "var"))
BROKER_DIR = _VAR_DIR / "test-brokers" / SESSION

os.environ["CELERY_QUEUE_PREFIX"] = SESSION
os.environ["CELERY_LEGACY_QUEUE"] = f"{SESSION}.celery"  # as an older release's queue, for this session only
os.environ["CACHE_KEY_PREFIX"] = SESSION
os.environ["CELERY_BROKER_DIR"] = str(BROKER_DIR)
# The test LLM server listens on 127.0.0.1: allow loopback endpoints for this session and
# the workers it starts (tests of the URL policy turn it off again).
os.environ.setdefault("ENDPOINT_ALLOW_PRIVATE_NETWORKS", "1")


def pytest_unconfigure(config):
    shutil.rmtree(BROKER_DIR, ignore_errors=True)
