"""A Redis outage: pages, logging in and API reads keep working; launches are refused with a
reason and store nothing; the launch limit fails closed and the token limit fails open (as
healthbench_web/throttles.py documents); /healthz/ says what is down.

The test starts a redis-server of its own on a free port and kills it halfway, so the shared
Redis of this machine is left alone. The application runs in a fresh process configured from
the environment, as in a deployment, and is driven with Django's test client; it waits on its
standard input while the test kills Redis."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

REDIS_SERVER = shutil.which("redis-server")

APP = r"""
import json, sys
import django
django.setup()
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token
from annotation.models import Physician
from grading.models import Endpoint, Run, RunBatch
from tests.grading_data import imported_run
from tests.people import person

call_command("migrate", verbosity=0)
researcher = person("reader", Physician.Role.RESEARCHER)
source = imported_run(conversations=2, samples=1, n_criteria=2)
Endpoint.objects.create(name="grader", base_url="http://127.0.0.1:9/v1", model="m", key_variable="")
token = Token.objects.create(user=researcher).key
api = {"HTTP_AUTHORIZATION": f"Token {token}"}
launch = {"grader": "grader", "responses_from": source.name}
browser = Client()
browser.post("/login/", {"username": "reader", "password": "pw-reader"})

def launched(name):
    return {"runs": Run.objects.filter(name=name).count(), "batches": RunBatch.objects.filter(run__name=name).count()}

def statuses(phase):
    out = {}
    for path in ("/", "/runs/", f"/runs/{source.code}/", f"/reports/{source.code}/", "/conversations/"):
        out[path] = browser.get(path).status_code
    out["login"] = Client().post("/login/", {"username": "reader", "password": "pw-reader"}).status_code
    token_answer = Client().post("/api/token/", {"username": "reader", "password": "pw-reader"})
    out["token"] = token_answer.status_code
    for path in ("/api/runs/", "/api/conversations/", f"/api/runs/{source.name}/report/"):
        out[path] = Client().get(path, **api).status_code
    answer = Client().post("/api/runs/", {**launch, "name": f"api-{phase}"}, content_type="application/json", **api)
    out["api_launch"] = {"status": answer.status_code, "body": answer.json(), **launched(f"api-{phase}")}
    form = browser.post("/runs/new/", {"name": f"form-{phase}", "source": "responses", "responses_from": source.code,
                                       "grader": "grader", "samples": 1, "concurrency": 4, "action": "launch"})
    out["form_launch"] = {"status": form.status_code, "page": form.content.decode(), **launched(f"form-{phase}")}
    health = Client().get("/healthz/")
    out["health"] = {"status": health.status_code, "checks": health.json()["checks"]}
    return out

for number, phase in enumerate(PHASES):
    if number:
        sys.stdin.readline()  # the test kills Redis now
    print(json.dumps({phase: statuses(phase)}), flush=True)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def own_redis(tmp_path):
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    port = _free_port()
    server = subprocess.Popen(
        [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
    yield server, port
    if server.poll() is None:
        server.kill()
    server.wait()


def _read(app: subprocess.Popen) -> dict:
    line = app.stdout.readline()
    assert line, app.stderr.read()
    return json.loads(line)


def _app(tmp_path, phases: list[str], **env) -> subprocess.Popen:
    environment = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CACHE_URL", "CELERY_BROKER_URL")
    }
    environment.update(
        VAR_DIR=str(tmp_path / "var"),
        DJANGO_SETTINGS_MODULE="healthbench_web.settings",
        TEST_DATABASE_NAME="",  # the app migrates its own SQLite file under VAR_DIR
        **env,
    )
    return subprocess.Popen(
        [sys.executable, "-c", f"PHASES = {phases!r}\n{APP}"],
        cwd=REPO,
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_pages_login_and_reads_survive_a_redis_outage_and_launches_are_refused_cleanly(tmp_path, own_redis):
    server, port = own_redis
    app = _app(tmp_path, ["up", "down"], REDIS_URL=f"redis://127.0.0.1:{port}/0")
    try:
        up = _read(app)["up"]
        server.kill()  # Redis goes away at once, as in a crash
        server.wait()
        app.stdin.write("go\n")
        app.stdin.flush()
        down = _read(app)["down"]
    finally:
        app.kill()
        app.wait()

    assert up["api_launch"]["status"] == 201
    assert up["api_launch"]["runs"] == 1
    assert up["form_launch"]["status"] == 302
    assert up["form_launch"]["runs"] == 1
    assert up["health"]["status"] == 200

    # Pages, logging in (form and token) and API reads answer as before.
    for path in ("/", "/runs/", "/conversations/", "/api/runs/", "/api/conversations/"):
        assert down[path] == 200, (path, down[path])
    assert down["login"] == 302
    assert down["token"] == 200, "the token limit fails open: failed passwords are counted in the database"
    run_page = next(path for path in down if path.startswith("/runs/") and path != "/runs/")
    report_page = next(path for path in down if path.startswith("/reports/"))
    report_api = next(path for path in down if path.endswith("/report/"))
    assert down[run_page] == down[report_page] == down[report_api] == 200

    # A launch is refused with a reason and leaves nothing behind, through the API and the form:
    # the launch limit cannot be counted, and fails closed.
    api_launch = down["api_launch"]
    assert api_launch["status"] == 503, api_launch
    assert "API_RUN_LAUNCH_RATE" in api_launch["body"]["detail"]
    assert "Try again" in api_launch["body"]["detail"]
    assert api_launch["runs"] == api_launch["batches"] == 0
    form_launch = down["form_launch"]
    assert form_launch["status"] == 503
    assert form_launch["runs"] == form_launch["batches"] == 0
    assert "cannot be checked right now" in form_launch["page"]

    assert down["health"]["status"] == 503
    assert down["health"]["checks"]["cache"]["ok"] is False
    assert down["health"]["checks"]["broker"]["ok"] is False
    assert down["health"]["checks"]["database"]["ok"] is True


def test_a_launch_while_only_the_broker_is_down_is_refused_and_stores_nothing(tmp_path):
    # The cache in process memory (no REDIS_URL) and a broker of its own that is not running.
    closed = _free_port()
    app = _app(tmp_path, ["down"], CELERY_BROKER_URL=f"redis://127.0.0.1:{closed}/0")
    try:
        down = _read(app)["down"]
    finally:
        app.kill()
        app.wait()
    assert down["/runs/"] == down["/api/runs/"] == down["token"] == 200
    assert down["login"] == 302
    api_launch = down["api_launch"]
    assert api_launch["status"] == 503, api_launch
    assert "task queue is unreachable" in api_launch["body"]["detail"]
    assert "Nothing was stored" in api_launch["body"]["detail"]
    assert api_launch["runs"] == api_launch["batches"] == 0
    form_launch = down["form_launch"]
    assert form_launch["status"] == 503
    assert "task queue is unreachable" in form_launch["page"]
    assert form_launch["runs"] == form_launch["batches"] == 0
    assert down["health"]["checks"]["broker"]["ok"] is False
    assert down["health"]["checks"]["cache"]["ok"] is True
