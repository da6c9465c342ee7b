"""The browser import on one enormous line: time linear in the size, memory flat.

Serves the app with gunicorn (one sync worker, DEBUG off) on a scratch PostgreSQL database,
logs in as a curator and streams a multipart upload of a file that is a single line of N MB
(no newline: a truncated or minified dump) to /curator/import/, for N = 50 and 200 by
default. It times each upload from the first byte sent to the answer, and reads the
worker's peak resident memory (VmHWM) after each. The upload must be refused with the
line-size message.

Baseline, in the same run: reading the same file in 1 MiB chunks with a plain loop that
looks for newlines (the least any importer must do with the bytes).
"""

import argparse
import http.client
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import fresh_postgres  # noqa: E402
from bench._server import wait_for_healthz  # noqa: E402

SECRET_KEY = "bench-upload-not-secret-" + "x" * 40
CHUNK = 1024 * 1024


def _write_single_line(path: Path, megabytes: int) -> None:
    block = b"abcdefghij" * (CHUNK // 10) + b"abcd"
    with path.open("wb") as f:
        f.write(b'{"prompt_id": "')
        for _ in range(megabytes):
            f.write(block)
        f.write(b'"}')


def _baseline_seconds(path: Path) -> float:
    start = time.perf_counter()
    newlines = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            newlines += chunk.count(b"\n")
    assert newlines == 0
    return time.perf_counter() - start


class Session:
    """Cookies and CSRF for a logged-in curator over plain http.client."""

    def __init__(self, port: int):
        self.port = port
        self.cookies: dict[str, str] = {}

    def _headers(self) -> dict[str, str]:
        return {"Host": "127.0.0.1", "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}

    def _keep_cookies(self, response: http.client.HTTPResponse) -> None:
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]

    def get(self, path: str) -> str:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        conn.request("GET", path, headers=self._headers())
        response = conn.getresponse()
        self._keep_cookies(response)
        return response.read().decode()

    def csrf(self, path: str) -> str:
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', self.get(path))
        assert found, f"no CSRF token on {path}"
        return found[1]

    def log_in(self, username: str, password: str) -> None:
        token = self.csrf("/login/")
        body = f"csrfmiddlewaretoken={token}&username={username}&password={password}".encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {**self._headers(), "Content-Type": "application/x-www-form-urlencoded"}
        conn.request("POST", "/login/", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        self._keep_cookies(response)
        assert "sessionid" in self.cookies, "login failed"

    def upload(self, path: Path) -> tuple[int, str, float]:
        """Stream `path` as the import form's file; (status, page, seconds)."""
        token = self.csrf("/curator/import/")
        boundary = uuid.uuid4().hex
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n{token}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{path.name}"\r\n'
            f"Content-Type: application/jsonl\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        start = time.perf_counter()
        conn.putrequest("POST", "/curator/import/", skip_host=True)
        for name, value in {
            **self._headers(),
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Content-Length": str(len(head) + path.stat().st_size + len(tail)),
        }.items():
            conn.putheader(name, value)
        conn.endheaders()
        conn.send(head)
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                conn.send(chunk)
        conn.send(tail)
        response = conn.getresponse()
        page = response.read().decode()
        return response.status, page, time.perf_counter() - start


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _worker(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200], help="file sizes in MB")
    parser.add_argument("--database", default="healthbench_bench_upload")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()

    os.environ["SECRET_KEY"] = SECRET_KEY
    fresh_postgres(args.database)
    from django.contrib.auth.models import User

    from annotation.models import Physician

    user = User.objects.create_user("bench-curator", password="bench-password")
    Physician.objects.create(user=user, role=Physician.Role.CURATOR)

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.update(
            DEBUG="0",
            SECRET_KEY=SECRET_KEY,
            ALLOWED_HOSTS="127.0.0.1,localhost",
            SECURE_SSL_REDIRECT="0",
            STATIC_ROOT=f"{tmp}/static",
            VAR_DIR=f"{tmp}/var",
            LOG_LEVEL="ERROR",
            TMPDIR=tmp,  # Django spools uploads to a temporary file here
        )
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=REPO, env=env, check=True
        )
        options = f"--bind 127.0.0.1:{args.port} --workers 1 --timeout 3600 --log-level warning"
        options += " --config bench/gunicorn_bare.conf.py"  # not the image's settings
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "healthbench_web.wsgi", *options.split()], cwd=REPO, env=env
        )
        try:
            wait_for_healthz(args.port)
            session = Session(args.port)
            session.log_in("bench-curator", "bench-password")
            worker = _worker(server.pid)
            print(f"worker peak memory after start and login: {_peak_rss_mb(worker):.0f} MB")
            print("size | upload refused in | per MB | worker peak memory | baseline (plain read) | ratio")
            for megabytes in args.sizes:
                path = Path(tmp) / f"single-line-{megabytes}mb.jsonl"
                _write_single_line(path, megabytes)
                baseline = min(_baseline_seconds(path) for _ in range(3))
                status, page, seconds = session.upload(path)
                assert status == 400, status
                assert "a line may hold at most 16,777,216 bytes" in page, page[:2000]
                print(
                    f"{megabytes} MB | {seconds:.2f} s | {seconds / megabytes * 1000:.1f} ms | "
                    f"{_peak_rss_mb(worker):.0f} MB | {baseline:.3f} s | {seconds / baseline:.1f}x"
                )
                path.unlink()
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
