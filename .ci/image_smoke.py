"""Start a built image directory as the image starts, with DEBUG=0, and check that it serves.

    python3 .ci/image_smoke.py DEST     (DEST made by `scripts/build-image DEST`)

There is no Docker daemon on CI, so this stands in for `docker run`: the command is the
Dockerfile's own CMD, run from DEST with DEST's virtualenv first on PATH and the image's
STATIC_ROOT, on a fresh SQLite database migrated first (compose's `migrate` service). Only the
address differs: GUNICORN_CMD_ARGS binds it to a free port on 127.0.0.1. Checks that the login
page, a static file it links, a 404 page and /healthz/ answer as they should.
"""

import json
import os
import re
import secrets
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
    print("image smoke test passed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python3 .ci/image_smoke.py DEST")
    sys.exit(main(Path(sys.argv[1]).resolve()))
