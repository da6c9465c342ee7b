"""Production settings pass Django's deployment checks; the compose file is complete."""

import os
import secrets
import subprocess
import sys

import yaml

from tests.conftest import REPO


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
    assert {"db", "redis", "web", "worker-grading", "worker-sampling"} <= set(services)
    for name, service in services.items():
        assert "healthcheck" in service, f"{name} has no healthcheck"
    assert "gunicorn" in str(services["web"]["command"])
    for queue in ("grading", "sampling"):
        worker = services[f"worker-{queue}"]
        # --scale worker-grading=N needs no fixed name and no published port.
        assert "container_name" not in worker and "ports" not in worker
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
