"""The web server's settings, in one place: the image's CMD is plain `gunicorn`, which reads this
file from its working directory (/app in the image). Command-line options and GUNICORN_CMD_ARGS
override it (the image smoke test binds to 127.0.0.1 that way)."""

import os


def _positive_int(name: str, default: int) -> int:
    raw = os.environ.get(name, str(default))
    if not raw.strip().isdigit() or int(raw) < 1:
        raise SystemExit(f"{name}={raw!r} is not a positive whole number")
    return int(raw)


wsgi_app = "healthbench_web.wsgi:application"
bind = "0.0.0.0:8000"
workers = _positive_int("WEB_CONCURRENCY", 3)
# A sync worker that has not answered within this many seconds is killed and replaced, so one
# stuck request (a lost database connection, a runaway report) cannot hold a process for ever.
# The slowest legitimate request, a cold paper-size report, takes seconds, not minutes.
timeout = _positive_int("GUNICORN_TIMEOUT", 120)
graceful_timeout = 30
accesslog = "-"
# No runtime control socket (gunicornc): nothing here uses it, and it would be a file under $HOME
# that two servers on one machine share.
control_socket_disable = True
