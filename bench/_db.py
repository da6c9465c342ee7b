"""Shared set-up for benchmarks: a fresh PostgreSQL database and Django on top of it."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def fresh_postgres(name: str) -> None:
    """Drop and create database `name`, point Django at it, set Django up and migrate."""
    import psycopg

    admin_url = os.environ.get("BENCH_ADMIN_DATABASE_URL", DEFAULT_ADMIN_URL)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin_url.rsplit("/", 1)[0]
    os.environ["DATABASE_URL"] = f"{base}/{name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")
    sys.path.insert(0, str(REPO))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
