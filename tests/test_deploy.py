"""Production settings pass Django's deployment checks; the compose file and the image are complete."""

import json
import os
import re
import secrets
import subprocess
import sys

import yaml

from tests.conftest import REPO

KEY_VARIABLES = ("OPENAI_API_KEY",)


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        DEBUG="0", SECRET_KEY=secrets.token_urlsafe(60), ALLOWED_HOSTS="studio.example.org", VAR_DIR=str(tmp_path)
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_compose_runs_every_service_with_a_healthcheck_and_scalable_workers():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"db", "redis", "migrate", "web", "worker-grading", "worker-sampling"} <= set(services)
    for name, service in services.items():
        if service.get("restart") != "no":  # a one-shot step (the migrations) has nothing to probe
            assert "healthcheck" in service, f"{name} has no healthcheck"
    # The web server is the image's own CMD: one gunicorn command, whose settings are gunicorn.conf.py.
    assert "command" not in services["web"]
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    for queue in ("grading", "sampling"):
        worker = services[f"worker-{queue}"]
        # --scale worker-grading=N needs no fixed name and no published port.
        assert "container_name" not in worker
        assert "ports" not in worker
        assert f"celery -A healthbench_web worker -Q healthbench.{queue} " in str(worker["command"])
        assert f"--destination {queue}@" in str(worker["healthcheck"]["test"])
    assert services["web"]["environment"]["CELERY_QUEUE_PREFIX"] == "healthbench"


def test_compose_checks_health_through_healthz_and_refuses_to_start_without_its_secrets():
    text = (REPO / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    assert "/healthz/" in str(services["web"]["healthcheck"]["test"])
    environment = services["web"]["environment"]
    # ${VAR:?message}: compose stops with the message when VAR is unset or empty; no weak default.
    assert "${SECRET_KEY:?" in environment["SECRET_KEY"]
    assert "${POSTGRES_PASSWORD:?" in environment["DATABASE_URL"]
    assert "${POSTGRES_PASSWORD:?" in services["db"]["environment"]["POSTGRES_PASSWORD"]
    assert "POSTGRES_PASSWORD:-" not in text
    # Only cache keys (which have a time to live) may be evicted, never queued tasks.
    assert "volatile-lru" in services["redis"]["command"]


def test_only_the_workers_get_provider_keys():
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    for name, service in services.items():
        environment = service.get("environment", {})
        if name.startswith("worker-"):
            assert set(KEY_VARIABLES) <= set(environment), name
        else:
            assert not set(KEY_VARIABLES) & set(environment), f"{name} gets a provider key"


def test_images_are_pinned_to_a_minor_release():
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    assert re.fullmatch(r"postgres:16\.\d+(-\w+)?", services["db"]["image"])
    assert re.fullmatch(r"redis:7\.\d+(\.\d+)?(-\w+)?", services["redis"]["image"])
    bases = re.findall(r"^FROM (\S+)", (REPO / "Dockerfile").read_text(), flags=re.M)
    assert bases
    assert all(re.fullmatch(r"python:3\.11\.\d+-slim-\w+", base) for base in bases), bases


def test_there_is_one_gunicorn_command_and_it_has_a_timeout():
    dockerfile = (REPO / "Dockerfile").read_text()
    command = [line for line in dockerfile.splitlines() if line.startswith("CMD ")]
    assert len(command) == 1
    assert json.loads(command[0].removeprefix("CMD ")) == ["gunicorn"]
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    assert not [name for name, service in services.items() if "gunicorn" in str(service.get("command", ""))]
    namespace: dict = {}
    exec((REPO / "gunicorn.conf.py").read_text(), namespace)  # noqa: S102 - our own config file, as gunicorn reads it
    assert namespace["wsgi_app"] == "healthbench_web.wsgi:application"
    assert 30 <= namespace["timeout"] <= 300
    # The build collects the static files; the image copies what the build script made.
    assert "scripts/build-image app" in dockerfile
    assert "collectstatic" in (REPO / "scripts" / "build-image").read_text()
