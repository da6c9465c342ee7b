"""The physician pages' CPU in process: where each page's milliseconds go, middleware included.

Runs on the database `bench/pages_bench.py` built (its `var/DATABASE.json` holds each physician's
session and tasks), with DEBUG off as in production, and calls the WSGI application itself as
gunicorn would (every middleware, the session read, the response's bytes). Per page: the CPU of
one request (median and mean over --requests, each a different physician's task, as the
benchmark's clients ask), its queries, and with --profile the functions that cost the most
(cProfile, by cumulative and by own time). The label POST runs inside a transaction that is
rolled back, so the database stays as the benchmark left it.

With --dump DIR each page's HTML (CSRF tokens blanked) is written to DIR, to compare two trees'
pages byte for byte (`diff -r`).

Usage: .venv/bin/python bench/pages_profile.py [--database hb_pages_bench] [--requests 60] [--profile]
       [--data var/DATABASE.json] [--dump DIR]
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAGES = ["home", "rubric editor", "ideal editor", "ballot", "label item", "label (htmx POST)"]
CSRF_VALUE = re.compile(rb'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+')


def _setup(database: str) -> None:
    from bench._db import DEFAULT_ADMIN_URL
    from bench.pages_data import SECRET_KEY

    admin_url = os.environ.get("BENCH_ADMIN_DATABASE_URL", DEFAULT_ADMIN_URL)
    os.environ.update(
        DATABASE_URL=f"{admin_url.rsplit('/', 1)[0]}/{database}",
        DEBUG="0",
        SECRET_KEY=SECRET_KEY,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="0",
        LOG_LEVEL="ERROR",
        DJANGO_SETTINGS_MODULE="healthbench_web.settings",
        # The hashed static files' manifest, as after a deployment's collectstatic.
        STATIC_ROOT=str(REPO / "var" / "pages_profile_static"),
    )
    import django
    from django.core.management import call_command

    django.setup()
    call_command("collectstatic", interactive=False, verbosity=0)


def _environ(method: str, path: str, session: str, body: bytes = b"", headers: dict | None = None) -> dict:
    """What gunicorn hands the application for one request."""
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8765",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1",
        "HTTP_COOKIE": f"sessionid={session}",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0),
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if body:
        environ["CONTENT_LENGTH"] = str(len(body))
    for name, value in (headers or {}).items():
        key = name.upper().replace("-", "_")
        environ[key if key == "CONTENT_TYPE" else f"HTTP_{key}"] = value
    return environ


class Pages:
    """The benchmark's requests, one physician after another, as its clients make them."""

    def __init__(self, data: dict):
        from django.core.wsgi import get_wsgi_application

        self.app = get_wsgi_application()
        self.physicians = data["physicians"]
        self.cookies: dict[str, dict[str, str]] = {}

    def call(self, environ: dict) -> tuple[str, bytes]:
        """One request; the cookies it sets are kept for the physician's next ones, as a browser does."""
        session = environ["HTTP_COOKIE"].split("sessionid=", 1)[1].split(";", 1)[0]
        jar = self.cookies.setdefault(session, {"sessionid": session})
        environ["HTTP_COOKIE"] = "; ".join(f"{k}={v}" for k, v in jar.items())
        status: list[str] = []

        def start_response(code: str, headers: list, *rest) -> None:
            status.append(code)
            for name, value in headers:
                if name.lower() == "set-cookie":
                    key, _, rest_of = value.partition("=")
                    jar[key.strip()] = rest_of.split(";", 1)[0]

        chunks = self.app(environ, start_response)  # type: ignore[arg-type]
        try:
            body = b"".join(chunks)
        finally:
            chunks.close()
        return status[0], body

    def request(self, page: str, n: int) -> tuple[str, bytes]:
        """Request number n of `page`: physician n, their task n // physicians + 1 of its kind."""
        p = self.physicians[n % len(self.physicians)]
        k = n // len(self.physicians) + 1
        tasks = p["tasks"]

        def task(kind: str, which: int) -> str:
            return tasks[kind][k % len(tasks[kind])][which]

        session = p["session"]
        if page == "label (htmx POST)":
            return self._post(session, task("label", 0))
        path = {
            "home": "/",
            "rubric editor": f"/conversations/{task('rubric', 1)}/rubric/",
            "ideal editor": f"/conversations/{task('ideal_response', 1)}/ideal/",
            "ballot": f"/conversations/{task('consensus_vote', 1)}/votes/",
            "label item": f"/labels/{task('label', 0)}/",
        }[page]
        return self.call(_environ("GET", path, session))

    def _post(self, session: str, code: str) -> tuple[str, bytes]:
        from django.db import transaction

        page = self.call(_environ("GET", f"/labels/{code}/", session))[1]
        found = re.search(rb'"X-CSRFToken": "([^"]+)"', page)
        token = found.group(1).decode() if found else ""
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "HX-Request": "true",
            "X-CSRFToken": token,
        }
        from django.core import signals
        from django.db import close_old_connections

        # Inside the rollback's transaction the request's end must not close the connection.
        signals.request_started.disconnect(close_old_connections)
        signals.request_finished.disconnect(close_old_connections)
        try:
            with transaction.atomic():
                result = self.call(_environ("POST", f"/labels/{code}/", session, b"met=yes&comment=", headers))
                transaction.set_rollback(True)
        finally:
            signals.request_started.connect(close_old_connections)
            signals.request_finished.connect(close_old_connections)
        return result


def _measure(pages: Pages, page: str, numbers: range) -> tuple[list[float], int]:
    """CPU milliseconds of each request (the POST's own, not the GET that fetched its token), and
    the queries of the last one."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cpu: list[float] = []
    queries = 0
    for n in numbers:
        if page == "label (htmx POST)":
            # The GET before it is not counted: time only the POST, inside `_post`.
            start = _post_cpu(pages, n)
            cpu.append(start)
            continue
        before = time.process_time()
        status, _ = pages.request(page, n)
        cpu.append((time.process_time() - before) * 1000)
        if not status.startswith("200"):
            raise SystemExit(f"{page} #{n}: {status}")
    with CaptureQueriesContext(connection) as captured:
        pages.request(page, numbers[-1])
    queries = len(captured.captured_queries) - (2 if page == "label (htmx POST)" else 0)
    return cpu, queries


def _post_cpu(pages: Pages, n: int) -> float:
    """One label POST's CPU in milliseconds (its token fetched first, not counted)."""
    original = pages.call
    spent: list[float] = []

    def timed(environ: dict) -> tuple[str, bytes]:
        if environ["REQUEST_METHOD"] != "POST":
            return original(environ)
        before = time.process_time()
        result = original(environ)
        spent.append((time.process_time() - before) * 1000)
        if not result[0].startswith("200"):
            raise SystemExit(f"label POST #{n}: {result[0]}")
        return result

    pages.call = timed  # type: ignore[method-assign]
    try:
        pages.request("label (htmx POST)", n)
    finally:
        pages.call = original  # type: ignore[method-assign]
    return spent[0]


# Where a request's CPU goes, each timed inclusively (a phase may hold another: SQL inside the view).
PHASES = {
    "session load": ("SESSION_ENGINE", "SessionStore", "load"),
    "auth get_user": ("healthbench_web.auth_user|django.contrib.auth", None, "get_user"),
    "view (all of it)": ("django.core.handlers.base", "BaseHandler", "_get_response"),
    "template render": ("django.template.backends.django", "Template", "render"),
    "SQL: compile + run": ("django.db.models.sql.compiler", "SQLCompiler", "execute_sql"),
    "SQL: compile": ("django.db.models.sql.compiler", "SQLCompiler", "as_sql"),
    "Markdown prefetch": ("annotation.views.rendering", None, "markdown_prefetch"),
    "Markdown filter": ("annotation.templatetags.text", None, "markdown_cached"),
    "gettext": ("django.utils.translation", "_trans", "gettext"),
    "reverse": ("django.urls.resolvers", "URLResolver", "_reverse_with_prefix"),
}


def _phases(pages: Pages, page: str, numbers: range) -> dict[str, float]:
    """Milliseconds of CPU per request in each phase, timed by wrapping its function (a nested
    call of the same function is counted once)."""
    import importlib

    spent = dict.fromkeys(PHASES, 0.0)
    undo = []
    from django.conf import settings

    for name, (module_name, class_name, attribute) in PHASES.items():
        # The first of the named modules this tree has (main's code may lack this branch's).
        for candidate in (settings.SESSION_ENGINE if module_name == "SESSION_ENGINE" else module_name).split("|"):
            try:
                module = importlib.import_module(candidate)
                break
            except ImportError:
                continue
        owner = getattr(module, class_name) if class_name else module
        original = getattr(owner, attribute)
        depth = [0]

        def timed(*args, __original=original, __name=name, __depth=depth, **kwargs):
            if __depth[0]:
                return __original(*args, **kwargs)
            __depth[0] += 1
            before = time.process_time()
            try:
                return __original(*args, **kwargs)
            finally:
                spent[__name] += time.process_time() - before
                __depth[0] -= 1

        setattr(owner, attribute, timed)
        undo.append((owner, attribute, original))
    try:
        before = time.process_time()
        for n in numbers:
            pages.request(page, n)
        total = time.process_time() - before
    finally:
        for owner, attribute, original in undo:
            setattr(owner, attribute, original)
    return {"whole request": total * 1000 / len(numbers)} | {k: v * 1000 / len(numbers) for k, v in spent.items()}


def _profile(pages: Pages, page: str, numbers: range, top: int) -> str:
    profiler = cProfile.Profile(time.process_time)  # CPU, not the wait for PostgreSQL
    profiler.enable()
    for n in numbers:
        pages.request(page, n)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="healthbench_bench_pages")
    parser.add_argument("--data", help="the benchmark's sessions and tasks (default var/DATABASE.json)")
    parser.add_argument("--requests", type=int, default=60, help="timed requests per page")
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated pages")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions per page")
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--phases", action="store_true", help="print each page's CPU per phase")
    parser.add_argument("--dump", help="write each page's HTML (CSRF tokens blanked) into this folder")
    args = parser.parse_args()
    data = json.loads(Path(args.data or REPO / "var" / f"{args.database}.json").read_text())
    _setup(args.database)
    pages = Pages(data)
    chosen = [p for p in args.pages.split(",") if p]
    for page in chosen:  # warm up: templates compiled, the catalogue's texts cached
        pages.request(page, 0)
    if args.dump:
        folder = Path(args.dump)
        folder.mkdir(parents=True, exist_ok=True)
        for page in chosen:
            for n in range(0, 400, 37):
                body = CSRF_VALUE.sub(rb"\1", pages.request(page, n)[1])
                (folder / f"{page.replace(' ', '_')}-{n}.html").write_bytes(body)
    print(f"load average {os.getloadavg()[0]:.1f}; CPU ms per request, {args.requests} requests per page")
    print(f"{'page':<20} {'median':>7} {'mean':>7} {'min':>7} {'queries':>8}")
    for index, page in enumerate(chosen):
        cpu, queries = _measure(pages, page, range(1 + index * 7, 1 + index * 7 + args.requests))
        print(f"{page:<20} {statistics.median(cpu):7.2f} {statistics.mean(cpu):7.2f} {min(cpu):7.2f} {queries:>8}")
    if args.phases:
        print("\nCPU ms per request by phase (inclusive; timing adds a little to each)")
        found = {
            page: _phases(pages, page, range(300 + i * 7, 300 + i * 7 + args.requests)) for i, page in enumerate(chosen)
        }
        print(f"{'phase':<20} " + " ".join(f"{page[:12]:>12}" for page in chosen))
        for phase in next(iter(found.values())):
            print(f"{phase:<20} " + " ".join(f"{found[page][phase]:12.2f}" for page in chosen))
    if args.profile:
        for index, page in enumerate(chosen):
            start = 500 + index * 7
            print(f"\n===== {page}\n" + _profile(pages, page, range(start, start + args.requests), args.top))


if __name__ == "__main__":
    main()
