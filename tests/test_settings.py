"""Settings fail loudly on bad environment values instead of running with a surprise."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _load_settings(tmp_path, **env) -> subprocess.CompletedProcess:
    clean = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DEBUG")
    }
    clean.update({"VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "healthbench_web.settings", **env})
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.DATABASES['default']['ENGINE'], settings.CONSENSUS_MIN_AGREE, settings.CELERY_BROKER_URL)"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=clean, capture_output=True, text=True)


def test_defaults_are_sqlite_and_a_filesystem_broker(tmp_path):
    done = _load_settings(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["django.db.backends.sqlite3", "2", "filesystem://"]


def test_postgres_is_used_when_database_url_is_set(tmp_path):
    done = _load_settings(tmp_path, DATABASE_URL="postgres://u@db:5432/hb", CONSENSUS_MIN_AGREE="3")
    assert done.stdout.split()[:2] == ["django.db.backends.postgresql", "3"]


@pytest.mark.parametrize(
    "env, message",
    [
        ({"CONSENSUS_MIN_AGREE": "two"}, "CONSENSUS_MIN_AGREE='two' is not an integer"),
        ({"CONSENSUS_MIN_AGREE": "0"}, "CONSENSUS_MIN_AGREE=0 is below the minimum of 1"),
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"DEBUG": "0", "SECRET_KEY": ""}, "SECRET_KEY must be set when DEBUG is off"),
        ({"DATABASE_URL": "mysql://u@h/db"}, "DATABASE_URL must name PostgreSQL or SQLite"),
        ({"CELERY_BROKER_URL": "carrier-pigeon://"}, "is not a broker URL"),
    ],
)
def test_bad_values_stop_start_up_with_a_message(tmp_path, env, message):
    done = _load_settings(tmp_path, **env)
    assert done.returncode != 0
    assert message in done.stderr
