"""Start a built image directory as the image starts, with DEBUG=0, and check that it serves.

    python3 .ci/image_smoke.py DEST     (DEST made by `scripts/build-image DEST`)

There is no Docker daemon on CI, so this stands in for `docker run`: the command is the
Dockerfile's own CMD, run from DEST with DEST's virtualenv first on PATH and the image's
STATIC_ROOT, on a fresh SQLite database migrated first (compose's `migrate` service). Only the
address differs: GUNICORN_CMD_ARGS binds it to a free port on 127.0.0.1. Checks that the login
page, a static file it links, a 404 page and /healthz/ answer as they should.

Then the image grades on Redis, from the runtime lock alone: a Redis server of its own, the test
LLM server (tests/llm_server.py, run by this Python), a Celery worker started as compose starts
it from DEST's virtualenv, and `grade --wait` on a two-conversation file, which must end `done`
within GRADE_SECONDS. (The runtime lock once lacked kombu's `packaging`: the worker could not
start on REDIS_URL, and only the dev lock hid it.)
"""

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRADE_SECONDS = 120


def image_command() -> list[str]:
    lines = [line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("CMD ")]
    return json.loads(lines[-1].removeprefix("CMD "))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def main(dest: Path) -> int:
    port = free_port()
    var = Path(tempfile.mkdtemp(prefix="image-smoke-"))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "CACHE_URL", "CELERY_BROKER_URL", "STATIC_ROOT")
    }
    env.update(
        PATH=f"{dest / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(50),
        VAR_DIR=str(var),
        STATIC_ROOT=str(dest / "staticfiles"),  # the Dockerfile's ENV, with /app replaced by DEST
        SECURE_SSL_REDIRECT="0",  # plain HTTP, as behind compose's default
        GUNICORN_CMD_ARGS=f"--bind 127.0.0.1:{port}",
    )
    subprocess.run(["python", "manage.py", "migrate", "--noinput", "-v0"], cwd=dest, env=env, check=True)
    command = image_command()
    print(f"starting the image's CMD {command} on 127.0.0.1:{port}", flush=True)
    server = subprocess.Popen(command, cwd=dest, env=env)
    base = f"http://127.0.0.1:{port}"
    failures = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(base + "/healthz/")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    print("FAILED: the server did not answer within 60 s", file=sys.stderr)
                    return 1
                time.sleep(0.5)

        def check(what: str, ok: bool, detail: str = "") -> None:
            print(f"{'ok' if ok else 'FAILED'}: {what}{f' ({detail})' if detail and not ok else ''}", flush=True)
            if not ok:
                failures.append(what)

        status, _, body = get(base + "/login/")
        check("/login/ answers 200", status == 200, f"status {status}")
        stylesheet = re.search(rb'href="(/static/style\.[0-9a-f]{12}\.css)"', body)
        check("/login/ links the stylesheet by its hashed name", stylesheet is not None)
        if stylesheet:
            status, headers, _ = get(base + stylesheet[1].decode())
            check(
                f"{stylesheet[1].decode()} answers 200 as CSS",
                status == 200 and "css" in headers.get("Content-Type", ""),
                f"status {status}, {headers.get('Content-Type')}",
            )
        status, _, body = get(base + "/no-such-page/")
        check("an unknown page is the styled 404", status == 404 and b"HealthBench Studio" in body, f"status {status}")
        status, _, body = get(base + "/healthz/")
        check("/healthz/ answers 200", status == 200, body.decode(errors="replace"))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    if failures:
        print(f"image smoke test FAILED: {', '.join(failures)}", file=sys.stderr)
        return 1
    if not grades_on_redis(dest, env):
        print("image smoke test FAILED: the image did not grade a run on Redis", file=sys.stderr)
        return 1
    print("image smoke test passed")
    return 0


def _row(prompt_id: str, word: str) -> dict:
    return {
        "example_tags": ["theme:hedging"],
        "ideal_completions_data": None,
        "prompt": [{"content": f"Tell me about rest. say: {word} and fluids", "role": "user"}],
        "prompt_id": prompt_id,
        "rubrics": [
            {"criterion": f"Mentions it. need:{word}", "points": 5, "tags": ["level:example", "axis:completeness"]},
            {"criterion": "Mentions sleep. need:sleep", "points": 3, "tags": ["level:example", "axis:accuracy"]},
        ],
    }


def grades_on_redis(dest: Path, image_env: dict[str, str]) -> bool:
    """A worker of the image, on a Redis of its own, grades a small run to the end."""
    if shutil.which("redis-server") is None:
        print("FAILED: redis-server is not installed (apt-get install redis-server)", file=sys.stderr)
        return False
    var = Path(tempfile.mkdtemp(prefix="image-smoke-redis-"))
    redis_port, llm_port = free_port(), free_port()
    env = image_env | {
        "VAR_DIR": str(var),
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "ENDPOINT_ALLOW_PRIVATE_NETWORKS": "1",
    }
    data = var / "rows.jsonl"
    data.write_text("".join(json.dumps(_row(f"smoke-{n}", word)) + "\n" for n, word in enumerate(("rest", "water"))))
    processes: list[subprocess.Popen] = []

    def manage(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        done = subprocess.run(
            ["python", "manage.py", *args], cwd=dest, env=env, capture_output=True, text=True, timeout=timeout
        )
        print(f"{'ok' if done.returncode == 0 else 'FAILED'}: manage.py {' '.join(args)}", flush=True)
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        return done

    try:
        redis_command = ["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port), "--save", ""]
        processes.append(subprocess.Popen([*redis_command, "--appendonly", "no"], stdout=subprocess.DEVNULL))
        llm = [sys.executable, "-m", "tests.llm_server", "--port", str(llm_port)]
        processes.append(subprocess.Popen(llm, cwd=REPO, stdout=subprocess.DEVNULL))
        started = time.monotonic()
        for port in (redis_port, llm_port):
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() - started > 30:
                        print(f"FAILED: nothing answers on port {port}", file=sys.stderr)
                        return False
                    time.sleep(0.2)
        base_url = f"http://127.0.0.1:{llm_port}/v1"
        steps = [
            ("migrate", "--noinput", "-v0"),
            ("import_healthbench", str(data)),
            ("endpoint", "add", "grader", "--preset", "original", "--base-url", base_url, "--key-variable", ""),
            (
                "endpoint",
                "add",
                "policy",
                "--preset",
                "original",
                "--model",
                "policy-demo",
                "--base-url",
                base_url,
                "--key-variable",
                "",
            ),
        ]
        if any(manage(*step).returncode != 0 for step in steps):
            return False
        # As docker-compose.yml starts its workers, from the image's virtualenv alone.
        worker = ["celery", "-A", "healthbench_web", "worker", "-Q", "healthbench.grading,healthbench.sampling"]
        consumer = subprocess.Popen([*worker, "--concurrency=1", "--loglevel=WARNING"], cwd=dest, env=env)
        processes.append(consumer)
        started = time.monotonic()
        grade = ["grade", "--name", "smoke", "--grader", "grader", "--policy", "policy", "--subset", "all", "--wait"]
        waiting = subprocess.Popen(
            ["python", "manage.py", *grade],
            cwd=dest,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        processes.append(waiting)
        # A worker that cannot start (a package missing from the runtime lock) fails at once,
        # not after GRADE_SECONDS.
        while waiting.poll() is None:
            if consumer.poll() is not None:
                print(f"FAILED: the worker exited with {consumer.returncode}", file=sys.stderr)
                return False
            if time.monotonic() - started > GRADE_SECONDS:
                print(f"FAILED: the run did not end within {GRADE_SECONDS} s", file=sys.stderr)
                return False
            time.sleep(0.5)
        stdout, stderr = waiting.communicate()
        if waiting.returncode != 0:
            print(stdout[-2000:], stderr[-2000:], file=sys.stderr)
        ok = waiting.returncode == 0 and "Done: smoke" in stdout
        print(f"{'ok' if ok else 'FAILED'}: a worker on Redis graded the run in {time.monotonic() - started:.0f} s")
        return ok
    finally:
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python3 .ci/image_smoke.py DEST")
    sys.exit(main(Path(sys.argv[1]).resolve()))
