"""/healthz/: one JSON document with a state per dependency, 503 when one is down, and an
answer to an internal probe whatever the HTTPS redirect and ALLOWED_HOSTS say.

The process-level cases run a fresh Django in a subprocess with the environment under test,
so that the settings are read from it as in a deployment (REDIS_URL pointing at a closed
port stands for a stopped Redis: the shared Redis of this machine is left alone)."""

import json
import os
import secrets
import socket
import subprocess
import sys

import pytest

from tests.conftest import REPO

# Requests made through Django's test client inside a freshly configured process.
PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.core.management import call_command
from django.test import Client
if not settings.DEBUG and COLLECT_STATIC:
    # The styled error pages name hashed static files, as after a deployment's collectstatic.
    call_command("collectstatic", interactive=False, verbosity=0)
client = Client()
out = {}
for name, path, host in REQUESTS:
    response = client.get(path, HTTP_HOST=host)
    out[name] = {"status": response.status_code, "location": response.get("Location", ""),
                 "body": response.json() if response.get("Content-Type") == "application/json" else None}
print(json.dumps(out))
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the socket is


def _probe(tmp_path, requests: list[tuple[str, str, str]], collect_static: bool = True, **env) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    base.update(VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="healthbench_web.settings", **env)
    done = subprocess.run(
        [sys.executable, "-c", f"REQUESTS = {requests!r}\nCOLLECT_STATIC = {collect_static}\n{PROBE}"],
        cwd=REPO,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_it_reports_each_check_and_answers_200_when_all_pass(client, db):
    response = client.get("/healthz/")
    assert response.status_code == 200
    document = response.json()
    assert document["status"] == "ok"
    assert set(document["checks"]) == {"database", "static", "cache", "broker"}
    assert document["checks"]["database"]["ok"] is True
    assert response["Cache-Control"].startswith("max-age=0")


def test_a_stopped_redis_shows_as_unhealthy_with_503(tmp_path):
    port = _closed_port()
    out = _probe(tmp_path, [("health", "/healthz/", "localhost")], REDIS_URL=f"redis://127.0.0.1:{port}/0")
    assert out["health"]["status"] == 503
    document = out["health"]["body"]
    assert document["status"] == "unhealthy"
    assert document["checks"]["database"]["ok"] is True
    assert document["checks"]["cache"] == {"ok": False, "error": "ConnectionError"}
    assert document["checks"]["broker"]["ok"] is False
    # The document names the failing check, not the address or any other detail of the set-up.
    assert str(port) not in json.dumps(document)


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs a running Redis (REDIS_URL)")
def test_a_running_redis_is_checked_and_healthy(tmp_path):
    out = _probe(tmp_path, [("health", "/healthz/", "localhost")], REDIS_URL=os.environ["REDIS_URL"])
    assert out["health"]["status"] == 200
    checks = out["health"]["body"]["checks"]
    assert checks["cache"]["backend"] == "redis"
    assert checks["broker"]["backend"] == "redis"


def test_an_internal_probe_passes_the_https_redirect_and_the_host_check_in_production(tmp_path):
    out = _probe(
        tmp_path,
        [
            ("probe", "/healthz/", "127.0.0.1:8000"),  # the compose healthcheck's request
            ("page_from_probe_host", "/login/", "127.0.0.1:8000"),
            ("page", "/login/", "studio.example.org"),
        ],
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(60),
        ALLOWED_HOSTS="studio.example.org",
        SECURE_SSL_REDIRECT="1",
    )
    assert out["probe"]["status"] == 200
    assert out["probe"]["body"]["status"] == "ok"
    # Everything else keeps both protections.
    assert out["page_from_probe_host"]["status"] == 400
    assert out["page"]["status"] == 301
    assert out["page"]["location"].startswith("https://studio.example.org/")


def test_a_production_process_without_the_static_manifest_is_unhealthy(tmp_path):
    # Started before (or without) collectstatic, every page of a DEBUG=0 process fails: the
    # health check must say so instead of answering 200 beside them.
    out = _probe(
        tmp_path,
        [("health", "/healthz/", "127.0.0.1:8000")],
        collect_static=False,
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(60),
    )
    assert out["health"]["status"] == 503
    assert out["health"]["body"]["checks"]["static"] == {"ok": False, "error": "ValueError"}
    assert out["health"]["body"]["checks"]["database"]["ok"] is True
