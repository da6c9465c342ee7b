"""A database outage: pages answer the site's 503 page and the API a JSON 503, both with
Retry-After, as /healthz/ says 503; never a 500 with a traceback.

The application runs in a fresh process configured from the environment, as in a deployment,
and is driven with Django's test client. One process is pointed at a PostgreSQL port where
nothing listens; another works on its own SQLite file, which then disappears while a
researcher is logged in."""

import json
import os
import socket
import subprocess
import sys

from tests.conftest import REPO

PROBES = r"""
import json, os, shutil, sys
import django
django.setup()
from django.db import connection
from django.test import Client

def shown(got):
    return {"status": got.status_code, "retry": got.get("Retry-After"), "type": got["Content-Type"],
            "body": got.content.decode()}

def answers(client, api):
    out = {path: shown(client.get(path)) for path in ("/", "/runs/", "/conversations/")}
    out["/api/runs/"] = shown(Client().get("/api/runs/", **api))
    credentials = {"username": "reader", "password": "pw-reader"}
    out["/api/token/"] = shown(Client().post("/api/token/", credentials, content_type="application/json"))
    health = Client().get("/healthz/")
    out["health"] = {"status": health.status_code, "database": health.json()["checks"]["database"]["ok"]}
    return out
"""

UNREACHABLE = (
    PROBES
    + r"""
browser = Client()
browser.cookies["sessionid"] = "a" * 32  # a session the database would have to be asked about
print(json.dumps(answers(browser, {"HTTP_AUTHORIZATION": "Token " + "b" * 40})), flush=True)
"""
)

VANISHING = (
    PROBES
    + r"""
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from annotation.models import Physician
from tests.people import person
call_command("migrate", verbosity=0)
researcher = person("reader", Physician.Role.RESEARCHER)
api = {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=researcher).key}"}
browser = Client()
browser.post("/login/", {"username": "reader", "password": "pw-reader"})
up = answers(browser, api)
# The database goes: its file is gone and a folder stands in its place, so SQLite cannot open it.
path = connection.settings_dict["NAME"]
connection.close()
os.rename(path, f"{path}.away")
os.mkdir(path)
down = answers(browser, api)
print(json.dumps({"up": up, "down": down}), flush=True)
"""
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(tmp_path, script: str, **env) -> dict:
    environment = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CACHE_URL", "CELERY_BROKER_URL")
    }
    environment.update(
        VAR_DIR=str(tmp_path / "var"),
        DJANGO_SETTINGS_MODULE="healthbench_web.settings",
        TEST_DATABASE_NAME="",
        **env,
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=environment, capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _assert_refused_as_an_outage(answers: dict) -> None:
    for path in ("/", "/runs/", "/conversations/"):
        page = answers[path]
        assert page["status"] == 503, (path, page["status"], page["body"][:300])
        assert page["retry"] == "30"
        assert page["type"].startswith("text/html")
        assert "The database cannot be reached right now" in page["body"]
        assert "Traceback" not in page["body"]
    for path in ("/api/runs/", "/api/token/"):
        api = answers[path]
        assert api["status"] == 503, (path, api["status"], api["body"][:300])
        assert api["retry"] == "30"
        assert api["type"] == "application/json"
        assert json.loads(api["body"]) == {
            "detail": "The database cannot be reached right now, so this request could not be answered. "
            "Try again in 30 seconds."
        }
    assert answers["health"] == {"status": 503, "database": False}


def test_with_postgresql_unreachable_pages_and_the_api_answer_503_with_retry_after(tmp_path):
    closed = _free_port()
    answers = _run(tmp_path, UNREACHABLE, DATABASE_URL=f"postgres://nobody@127.0.0.1:{closed}/healthbench")
    _assert_refused_as_an_outage(answers)


def test_a_database_lost_while_logged_in_is_a_503_not_a_500(tmp_path):
    answers = _run(tmp_path, VANISHING)
    up = answers["up"]
    for path in ("/", "/runs/", "/conversations/", "/api/runs/", "/api/token/"):
        assert up[path]["status"] == 200, (path, up[path]["status"])
    assert up["health"] == {"status": 200, "database": True}
    _assert_refused_as_an_outage(answers["down"])
