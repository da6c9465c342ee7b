"""Physician pages under load: a paper-size database served by gunicorn, 16 concurrent clients.

Builds 5,000 conversations (~60,000 criteria), 200 physicians and their tasks
(bench/pages_data.py), serves the app with gunicorn on loopback with DEBUG off, as in
production, and loads the physician pages from a second process of 16 client threads
(bench/pages_client.py). Bounded: --rounds per client (6 requests each) and --seconds overall.
Prints p50 / p95 / max per page, and the CPU each request cost the server and the client.

Target (issue 6): 95th-percentile latency <= 150 ms on every page.
Usage: .venv/bin/python bench/pages_bench.py [--conversations 5000] [--physicians 200] [--clients 16] [--reuse]
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import DEFAULT_ADMIN_URL  # noqa: E402
from bench._server import wait_for_healthz  # noqa: E402
from bench.pages_client import PAGES  # noqa: E402
from bench.pages_data import SECRET_KEY, build  # noqa: E402

TARGET_P95_MS = 150


def _server_env(database_url: str, static_root: str, var_dir: str) -> dict:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        DEBUG="0",
        SECRET_KEY=SECRET_KEY,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="0",
        STATIC_ROOT=static_root,
        VAR_DIR=var_dir,
        LOG_LEVEL="ERROR",
    )
    return env


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of processes, from /proc (Linux)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def _workers(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children")
    return [int(pid) for pid in children.read_text().split()] if children.exists() else []


def _postgres_backends() -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return [row[0] for row in cursor.fetchall()]


def _data(args) -> dict:
    """Build the database (or, with --reuse, take the previous one) and set Django up on it."""
    os.environ["SECRET_KEY"] = SECRET_KEY
    saved = REPO / "var" / f"{args.database}.json"
    if args.reuse and saved.exists():
        admin_url = os.environ.get("BENCH_ADMIN_DATABASE_URL", DEFAULT_ADMIN_URL)
        os.environ["DATABASE_URL"] = f"{admin_url.rsplit('/', 1)[0]}/{args.database}"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")
        import django

        django.setup()
        return json.loads(saved.read_text())
    data = build(
        database=args.database, conversations=args.conversations, physicians=args.physicians, rounds=args.rounds
    )
    saved.parent.mkdir(exist_ok=True)
    saved.write_text(json.dumps(data))
    return data


def _serve_and_load(args, data: dict) -> tuple[dict, float, int]:
    """Start gunicorn, run the client process; returns (its report, server CPU seconds, DB connections)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = _server_env(os.environ["DATABASE_URL"], f"{tmp}/static", f"{tmp}/var")
        collect = [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"]
        subprocess.run(collect, cwd=REPO, env=env, check=True)
        worker_class = "gthread" if args.threads > 1 else "sync"
        options = f"--bind 127.0.0.1:{args.port} --workers {args.workers} --threads {args.threads} "
        options += f"--worker-class {worker_class} --log-level warning --config bench/gunicorn_bare.conf.py"
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "healthbench_web.wsgi", *options.split()], cwd=REPO, env=env
        )
        try:
            wait_for_healthz(args.port)
            config = Path(tmp) / "clients.json"
            settings = {"port": args.port, "rounds": args.rounds, "seconds": args.seconds, "clients": args.clients}
            config.write_text(json.dumps({**settings, **data}))
            workers = _workers(server.pid)
            cpu_before = _cpu_seconds(workers)
            client = [sys.executable, str(REPO / "bench" / "pages_client.py"), str(config)]
            out = subprocess.run(client, cwd=REPO, capture_output=True, text=True, timeout=args.seconds + 120)
            if out.returncode:
                raise SystemExit(f"client failed:\n{out.stderr}")
            report = json.loads(out.stdout.strip().splitlines()[-1])
            return report, _cpu_seconds(workers) - cpu_before, len(_postgres_backends())
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)


def _print_report(args, report: dict, server_cpu: float, backends: int, load_before: float) -> None:
    results = report["results"]
    total = sum(len(v) for v in results.values())
    rate = total / report["seconds"]
    print(
        f"gunicorn {args.workers} workers x {args.threads} threads, {args.clients} concurrent clients, "
        f"{total} timed requests in {report['seconds']:.1f} s ({rate:.0f} req/s), {report['n_errors']} errors"
    )
    requests = total + args.clients * len(PAGES)  # the warm-up round is served but not timed
    print(
        f"CPU per request: gunicorn workers {server_cpu / requests * 1000:.1f} ms, "
        f"client process {report['client_cpu'] / requests * 1000:.1f} ms; {os.cpu_count()} CPUs, "
        f"load average before the run {load_before:.1f} ({backends} PostgreSQL connections held by the workers)"
    )
    for error in report["errors"]:
        print("  error:", error)
    print(f"{'page':<20} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    worst = 0.0
    for page in PAGES:
        values = results[page]
        if not values:
            print(f"{page:<20} {0:>5}")
            continue
        p50, p95 = _percentile(values, 0.5) * 1000, _percentile(values, 0.95) * 1000
        worst = max(worst, p95)
        print(f"{page:<20} {len(values):>5} {p50:8.1f} {p95:8.1f} {max(values) * 1000:8.1f}")
    all_values = [v for values in results.values() for v in values]
    median, p95_all = statistics.median(all_values) * 1000, _percentile(all_values, 0.95) * 1000
    print(f"{'all pages':<20} {len(all_values):>5} {median:8.1f} {p95_all:8.1f}")
    ok = worst <= TARGET_P95_MS and report["n_errors"] == 0
    print(f"target p95 <= {TARGET_P95_MS} ms on every page: " + ("met" if ok else f"MISSED (worst p95 {worst:.0f} ms)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--physicians", type=int, default=200)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=40, help="rounds per client (each round: 6 requests)")
    parser.add_argument("--seconds", type=float, default=180, help="stop the clients after this long")
    # Sync workers, one more than the CPUs: each request is CPU-bound Python; more workers only queue on the CPUs.
    parser.add_argument("--workers", type=int, default=(os.cpu_count() or 1) + 1)
    parser.add_argument("--threads", type=int, default=1, help="threads per worker (more than 1 uses gthread)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--database", default="healthbench_bench_pages")
    parser.add_argument("--reuse", action="store_true", help="reuse the database and sessions of the previous run")
    args = parser.parse_args()
    data = _data(args)
    load_before = os.getloadavg()[0]
    report, server_cpu, backends = _serve_and_load(args, data)
    _print_report(args, report, server_cpu, backends, load_before)


if __name__ == "__main__":
    main()
