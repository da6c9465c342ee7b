"""Each test session's database, cloned from a migrated template instead of migrated again.

Migrating an empty database costs seconds every session (about 10 s on SQLite, 12 s on
PostgreSQL), and the per-process test database name (settings: TEST NAME with the pid) means
pytest-django's --reuse-db never finds an old one. So the first session migrates a template
once, named after a hash of every installed app's migration files, and every session copies it:
PostgreSQL's `CREATE DATABASE ... TEMPLATE`, or a copy of the SQLite file. A new or edited
migration changes the hash, so a stale template is never used.

Two sessions may start at once (two checkouts, CI's two suites): the template is built and
cloned under a lock (a PostgreSQL advisory lock per template on the server, an flock beside
the SQLite files), and built under a temporary name that is renamed only once migrated, so a
session killed while building leaves no half-migrated template behind. Templates are kept
for the next session; one that no checkout's migrations name any more may be dropped by hand
(PostgreSQL: `NAME_tpl_HASH`; SQLite: `VAR_DIR/test-template-HASH.sqlite3`).
"""

import fcntl
import hashlib
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db import connection

# The advisory locks' first key (the second is the template's): a number no product code takes.
_PG_LOCK_SPACE = 0x4842_7E57


def migrations_hash() -> str:
    """A hash of every installed app's migration files (ours and the libraries'), and of the
    database engine: what decides the migrated schema."""
    digest = hashlib.sha256(connection.vendor.encode())
    for app in sorted(apps.get_app_configs(), key=lambda a: a.label):
        folder = Path(app.path) / "migrations"
        for path in sorted(folder.glob("*.py")):
            digest.update(f"{app.label}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def template_name(database_name: str) -> str:
    """The template's database name (PostgreSQL, beside `database_name`) or file path (SQLite,
    beside the test database files) for today's migrations."""
    if connection.vendor == "postgresql":
        # PostgreSQL cuts names at 63 bytes; the hash must survive the cut.
        return f"{database_name[:30]}_tpl_{migrations_hash()}"
    test_name = str(connection.settings_dict["TEST"]["NAME"])
    return str(Path(test_name).parent / f"test-template-{migrations_hash()}.sqlite3")


# The template this session's database was cloned from (for its test).
session_template = ""


def create_test_database(verbosity: int = 0) -> str:
    """Clone the template into this session's test database (building the template first if no
    session has), point the connection at it, and return the name to restore at teardown."""
    global session_template
    old_name = settings.DATABASES["default"]["NAME"]
    template = session_template = template_name(old_name)
    test_name = str(connection.settings_dict["TEST"]["NAME"])
    if connection.vendor == "postgresql":
        with _pg_lock(template):
            if not _pg_exists(template):
                _build(template, verbosity)
                _pg_rename(f"{template}_building", template)
            _pg_clone(template, test_name)
    else:
        with _file_lock(Path(template).with_suffix(".lock")):
            if not Path(template).exists():
                building = f"{template}.building"
                _build(building, verbosity)
                os.replace(building, template)
            shutil.copyfile(template, test_name)
    _point_at(test_name)
    connection.ensure_connection()
    return old_name


def _build(name: str, verbosity: int) -> None:
    """Migrate a new database under `name` (Django's own test database creation), then point
    the connection back where it was."""
    old_name = settings.DATABASES["default"]["NAME"]
    test_settings = connection.settings_dict["TEST"]
    session_test_name = test_settings["NAME"]
    test_settings["NAME"] = name if connection.vendor != "postgresql" else f"{name}_building"
    try:
        connection.creation.create_test_db(verbosity=verbosity, autoclobber=True, serialize=False)
    finally:
        test_settings["NAME"] = session_test_name
        connection.close()
        _point_at(old_name)


def _point_at(name: str) -> None:
    connection.close()
    settings.DATABASES["default"]["NAME"] = name
    connection.settings_dict["NAME"] = name


@contextmanager
def _pg_lock(template: str) -> Iterator[None]:
    # One lock per template, so a checkout building its own (other migrations) keeps no other
    # checkout waiting. Held on a connection to the server's maintenance database, which no
    # clone reads from; it ends with that connection if the session dies.
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [_PG_LOCK_SPACE, template])
        try:
            yield
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [_PG_LOCK_SPACE, template])


def _pg_exists(name: str) -> bool:
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


def _pg_rename(old: str, new: str) -> None:
    quote = connection.ops.quote_name
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"ALTER DATABASE {quote(old)} RENAME TO {quote(new)}")


def _pg_clone(template: str, name: str) -> None:
    quote = connection.ops.quote_name
    with connection._nodb_cursor() as cursor:
        # A session killed before its teardown left its database behind; its pid is ours now.
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(name)} WITH (FORCE)")
        cursor.execute(f"CREATE DATABASE {quote(name)} TEMPLATE {quote(template)}")


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
