"""Helpers shared by the benchmarks that start gunicorn on this machine."""

import http.client
import time


def wait_for_healthz(port: int, *, seconds: float = 60, timeout: float = 2) -> None:
    """Return once the server on `port` answers /healthz/ with 200; stop the bench if it never does."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            conn.request("GET", "/healthz/", headers={"Host": "127.0.0.1"})
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("gunicorn did not answer /healthz/")
