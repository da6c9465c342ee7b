"""Settings fail loudly on bad environment values instead of running with a surprise."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

DEFAULT_PRINT = (
    "print(settings.DATABASES['default']['ENGINE'], settings.CONSENSUS_MIN_AGREE, settings.CELERY_BROKER_URL)"
)


def _load_settings(tmp_path, code: str = "", **env) -> subprocess.CompletedProcess:
    clean = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DEBUG")
    }
    clean.update({"VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "healthbench_web.settings", **env})
    code = code or DEFAULT_PRINT
    code = "import django; django.setup(); from django.conf import settings; " + code
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=clean, capture_output=True, text=True)


def test_defaults_are_sqlite_and_a_filesystem_broker(tmp_path):
    done = _load_settings(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["django.db.backends.sqlite3", "2", "filesystem://"]


def test_postgres_is_used_when_database_url_is_set(tmp_path):
    done = _load_settings(tmp_path, DATABASE_URL="postgres://u@db:5432/hb", CONSENSUS_MIN_AGREE="3")
    assert done.stdout.split()[:2] == ["django.db.backends.postgresql", "3"]


@pytest.mark.parametrize(
    ("env", "message"),
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


HSTS = "print(settings.SECURE_HSTS_SECONDS, settings.SECURE_HSTS_INCLUDE_SUBDOMAINS, settings.SECURE_HSTS_PRELOAD)"


def test_hsts_covers_subdomains_and_preload_unless_a_shared_domain_turns_them_off(tmp_path):
    production = {"DEBUG": "0", "SECRET_KEY": "x" * 60}
    assert _load_settings(tmp_path, HSTS, **production).stdout.split() == ["31536000", "True", "True"]
    shared = _load_settings(tmp_path, HSTS, SECURE_HSTS_INCLUDE_SUBDOMAINS="0", SECURE_HSTS_PRELOAD="0", **production)
    assert shared.stdout.split() == ["31536000", "False", "False"], shared.stderr
    bad = _load_settings(tmp_path, HSTS, SECURE_HSTS_PRELOAD="sometimes", **production)
    assert "SECURE_HSTS_PRELOAD='sometimes' is not a boolean" in bad.stderr
