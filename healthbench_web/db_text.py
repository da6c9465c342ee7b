"""Text read from SQLite never takes a page down.

SQLite stores whatever bytes it is given: a row written by another tool (or by this one
before the importers checked their input) can hold NUL or bytes that are not UTF-8, and
Python's sqlite3 then raises on every query that reads it. PostgreSQL refuses both on
write, so this applies to SQLite only. Bad bytes become U+FFFD; `manage.py
check_stored_text` finds and repairs such rows.
"""

from typing import Any

from django.db.backends.signals import connection_created


def decode_sqlite_text(raw: bytes) -> str:
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        text = raw.decode(errors="replace")
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _on_connection(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor == "sqlite":
        connection.connection.text_factory = decode_sqlite_text


def install() -> None:
    connection_created.connect(_on_connection, dispatch_uid="healthbench_sqlite_text")
