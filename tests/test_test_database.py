"""The test database is cloned from a migrated template (tests/database_template.py)."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from tests import database_template
from tests.conftest import REPO

pytestmark = pytest.mark.django_db


def test_the_session_database_has_every_migration_applied():
    loader = MigrationLoader(connection)
    assert set(loader.applied_migrations) == set(loader.disk_migrations)


def test_the_session_database_is_this_process_own_clone():
    assert str(os.getpid()) in str(connection.settings_dict["NAME"])
    assert connection.settings_dict["NAME"] != database_template.session_template


def test_the_template_is_kept_for_the_next_session():
    template = database_template.session_template
    assert template
    if connection.vendor == "postgresql":
        assert database_template._pg_exists(template)
    else:
        assert Path(template).exists()


def test_the_template_name_changes_with_any_migration_file(tmp_path, monkeypatch):
    migrations = tmp_path / "app" / "migrations"
    migrations.mkdir(parents=True)
    (migrations / "0001_initial.py").write_text("operations = []\n")
    fake_apps = SimpleNamespace(get_app_configs=lambda: [SimpleNamespace(label="app", path=str(tmp_path / "app"))])
    monkeypatch.setattr(database_template, "apps", fake_apps)
    first = database_template.migrations_hash()
    assert database_template.migrations_hash() == first
    (migrations / "0002_more.py").write_text("operations = []\n")
    second = database_template.migrations_hash()
    assert second != first
    (migrations / "0002_more.py").write_text("operations = [1]\n")
    assert database_template.migrations_hash() != second


def _fresh_names(tmp_path: Path) -> dict[str, str]:
    """Environment for sessions that share no template with this one: another VAR_DIR (SQLite)
    or another database name (PostgreSQL)."""
    if connection.vendor == "postgresql":
        return {"DATABASE_NAME": f"hbtpl{os.getpid()}"}
    return {"VAR_DIR": str(tmp_path)}


def test_two_sessions_starting_at_once_share_one_template(tmp_path):
    env = {**os.environ, **_fresh_names(tmp_path)}
    env.pop("TEST_DATABASE_NAME", None)
    node = f"{Path(__file__).name}::test_the_session_database_has_every_migration_applied"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/{node}"]
    sessions = [
        subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outputs = [session.communicate(timeout=300)[0] for session in sessions]
    try:
        for session, output in zip(sessions, outputs, strict=True):
            assert session.returncode == 0, output
        if connection.vendor == "postgresql":
            with connection._nodb_cursor() as cursor:
                cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [f"%hbtpl{os.getpid()}%"])
                left = sorted(row[0] for row in cursor.fetchall())
            # One template; no half-built one, and each session dropped its own clone.
            assert len(left) == 1
            assert "_tpl_" in left[0]
            assert not left[0].endswith("_building")
        else:
            left = sorted(path.name for path in tmp_path.glob("test-*.sqlite3*"))
            assert len(left) == 1
            assert left[0].startswith("test-template-")
            assert left[0].endswith(".sqlite3")
    finally:
        if connection.vendor == "postgresql":
            with connection._nodb_cursor() as cursor:
                cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [f"%hbtpl{os.getpid()}%"])
                for (name,) in cursor.fetchall():
                    cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)} WITH (FORCE)")
