"""Physician pages under load: a paper-size database served by gunicorn, 16 concurrent clients.

Builds 5,000 conversations (~60,000 criteria), 200 physicians and their tasks
(bench/pages_data.py), serves the app with gunicorn on loopback with DEBUG off, as in
production, and loads the physician pages from a second process of 16 client threads
(bench/pages_client.py). Bounded: --rounds per client (6 requests each) and --seconds overall.
Prints p50 / p95 / max per page, and the CPU each request cost the server and the client.

Baseline, in the same run and on the same database: --baseline-ref (main) checked out with
git archive into a temporary directory and served the same way. Each side gets the load (16
clients without think time) and then the soak (--soak-physicians clients, each waiting 5-20 s
before every request, as a physician reading; --soak-seconds 0 skips it). Before its own load,
this code's store of rendered Markdown is filled (manage.py render_markdown, timed), as after
any import: the pages then read each text's HTML instead of rendering it.

Targets (issues 6 and 30): p95 <= 150 ms on every page under load; server CPU <= 6 ms per
request; in the soak p95 <= 300 ms and no errors.
Usage: .venv/bin/python bench/pages_bench.py [--conversations 5000] [--physicians 200] [--clients 16] [--reuse]
       [--baseline-ref main] [--soak-seconds 600] [--soak-physicians 200]
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import DEFAULT_ADMIN_URL  # noqa: E402
from bench._server import wait_for_healthz  # noqa: E402
from bench.pages_client import PAGES  # noqa: E402
from bench.pages_data import SECRET_KEY, build  # noqa: E402

TARGET_P95_MS = 150
TARGET_CPU_MS = 6
SOAK_TARGET_P95_MS = 300
THINK_SECONDS = (5, 20)


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


def _baseline_tree(ref: str) -> Path:
    """The baseline's code, from git, in a temporary directory (served with this interpreter)."""
    tree = Path(tempfile.mkdtemp(prefix="pages-bench-baseline-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _fill_store(env: dict) -> str:
    """Render every stored text's Markdown into the store, as after an import; says what it cost."""
    wall, cpu = time.perf_counter(), os.times()
    done = subprocess.run(
        [sys.executable, "manage.py", "render_markdown"], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    after = os.times()
    used = after.children_user + after.children_system - cpu.children_user - cpu.children_system
    return f"{done.stdout.strip()} in {time.perf_counter() - wall:.0f} s wall, {used:.0f} s CPU"


def _long_page_figures(rounds: int = 5) -> None:
    """Markdown's CPU on the longest page issue 30 names (19 turns of 8,018 words, a 6,090-word
    response, a criterion): rendered on every request, as main's filter does, against this
    code's store read back by another process (one query) and its process cache."""
    import random

    from annotation.services.rendered_markdown import markdown_cache_clear, markdown_cached, markdown_prefetch
    from healthbench_web.markdown_text import markdown_html

    rng = random.Random(30)
    words = "fever rest fluids **review** dose 25 mg paracetamol child emergency call doctor if it persists".split()

    def text(n: int) -> str:
        blocks = []
        while n > 0:
            if n > 8 and rng.random() < 0.3:
                blocks.append("- " + " ".join(rng.choice(words) for _ in range(8)))
                n -= 8
            blocks.append(" ".join(rng.choice(words) for _ in range(min(n, 60))))
            n -= 60
        return "\n\n".join(blocks)

    texts = [text(8018 // 19) for _ in range(19)] + [text(6090), text(20)]
    markdown_prefetch(texts)  # stored once, as the first reader would

    def per_page(work) -> float:
        start = time.process_time()
        for _ in range(rounds):
            work()
        return (time.process_time() - start) / rounds * 1000

    def stored() -> None:
        markdown_cache_clear()  # another process: one query for the page's HTML
        markdown_prefetch(texts)
        [markdown_cached(t) for t in texts]

    baseline = per_page(lambda: [markdown_html(t) for t in texts])
    read = per_page(stored)
    warm = per_page(lambda: [markdown_cached(t) for t in texts])
    print(
        f"== Markdown on a label page of 19 turns ({8018 // 19 * 19:,} words) and a 6,090-word response "
        f"(CPU per request, load average {os.getloadavg()[0]:.1f}): rendered per request (main) {baseline:.1f} ms; "
        f"this code, read from the store {read:.1f} ms, from the process cache {warm:.2f} ms"
    )


def _serve_and_load(args, data: dict, *, tree: Path, clients: int, rounds: int, seconds: float, think) -> dict:
    """Start gunicorn from `tree`, run the client process; returns its report with the server's
    CPU seconds, the DB connections held, and the load average before and after."""
    with tempfile.TemporaryDirectory() as tmp:
        env = _server_env(os.environ["DATABASE_URL"], f"{tmp}/static", f"{tmp}/var")
        collect = [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"]
        subprocess.run(collect, cwd=tree, env=env, check=True)
        worker_class = "gthread" if args.threads > 1 else "sync"
        options = f"--bind 127.0.0.1:{args.port} --workers {args.workers} --threads {args.threads} "
        options += f"--worker-class {worker_class} --log-level warning --config {REPO}/bench/gunicorn_bare.conf.py"
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "healthbench_web.wsgi", *options.split()], cwd=tree, env=env
        )
        try:
            wait_for_healthz(args.port)
            config = Path(tmp) / "clients.json"
            settings = {"port": args.port, "rounds": rounds, "seconds": seconds, "clients": clients, "think": think}
            config.write_text(json.dumps({**settings, **data}))
            workers = _workers(server.pid)
            load_before, wall = os.getloadavg()[0], time.perf_counter()
            cpu_before = _cpu_seconds(workers)
            client = [sys.executable, str(REPO / "bench" / "pages_client.py"), str(config)]
            out = subprocess.run(client, cwd=REPO, capture_output=True, text=True, timeout=seconds + 180)
            if out.returncode:
                raise SystemExit(f"client failed:\n{out.stderr}")
            report = json.loads(out.stdout.strip().splitlines()[-1])
            report["server_cpu"] = _cpu_seconds(workers) - cpu_before
            report["wall"] = time.perf_counter() - wall
            report["backends"] = len(_postgres_backends())
            report["load"] = (load_before, os.getloadavg()[0])
            report["clients"] = clients
            return report
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)


def _print_report(args, side: str, report: dict, *, target_ms: float, warm_up: bool) -> bool:
    """One side's figures; True when its targets are met."""
    results = report["results"]
    total = sum(len(v) for v in results.values())
    rate = total / report["seconds"]
    # The warm-up round is served but not timed.
    requests = total + (report["clients"] * len(PAGES) if warm_up else 0)
    cpu_ms = report["server_cpu"] / max(requests, 1) * 1000
    load_before, load_after = report["load"]
    print(
        f"-- {side}: {report['clients']} clients, {total} timed requests in {report['wall']:.0f} s wall "
        f"({rate:.1f} req/s), {report['n_errors']} errors; server CPU {report['server_cpu']:.1f} s = "
        f"{cpu_ms:.1f} ms per request (client {report['client_cpu'] / max(requests, 1) * 1000:.1f} ms); "
        f"load average {load_before:.1f} before, {load_after:.1f} after; {os.cpu_count()} CPUs, "
        f"{report['backends']} PostgreSQL connections"
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
    if all_values:
        median, p95_all = statistics.median(all_values) * 1000, _percentile(all_values, 0.95) * 1000
        print(f"{'all pages':<20} {len(all_values):>5} {median:8.1f} {p95_all:8.1f}")
    ok = bool(all_values) and worst <= target_ms and report["n_errors"] == 0
    print(
        f"target p95 <= {target_ms} ms on every page, no errors: " + ("met" if ok else f"MISSED (worst {worst:.0f} ms)")
    )
    return ok


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
    parser.add_argument("--baseline-ref", default="main", help="the code measured beside this one ('' for none)")
    parser.add_argument("--soak-seconds", type=float, default=600, help="the soak's length per side (0: no soak)")
    parser.add_argument("--soak-physicians", type=int, default=200)
    parser.add_argument("--long-page-only", action="store_true", help="only the Markdown figures of the long page")
    parser.add_argument("--soak-only", action="store_true", help="skip the load without think time")
    args = parser.parse_args()
    data = _data(args)
    if args.long_page_only:
        _long_page_figures()
        return
    sides = [("baseline " + args.baseline_ref, _baseline_tree(args.baseline_ref))] if args.baseline_ref else []
    sides.append(("this code", REPO))
    print(_fill_store(_server_env(os.environ["DATABASE_URL"], "", str(REPO / "var"))))
    _long_page_figures()
    load = {"clients": args.clients, "rounds": args.rounds, "seconds": args.seconds, "think": None}
    clients = min(args.soak_physicians, len(data["physicians"]))
    soak = {"clients": clients, "rounds": 10_000, "seconds": args.soak_seconds, "think": THINK_SECONDS}
    print(f"== load: {args.clients} clients without think time, up to {args.rounds} rounds or {args.seconds:.0f} s")
    for side, tree in [] if args.soak_only else sides:
        report = _serve_and_load(args, data, tree=tree, **load)
        _print_report(args, side, report, target_ms=TARGET_P95_MS, warm_up=True)
    if args.soak_seconds <= 0:
        return
    print(
        f"== soak: {clients} physicians, {THINK_SECONDS[0]}-{THINK_SECONDS[1]} s think time before each request, "
        f"{args.soak_seconds:.0f} s"
    )
    for side, tree in sides:
        report = _serve_and_load(args, data, tree=tree, **soak)
        _print_report(args, side, report, target_ms=SOAK_TARGET_P95_MS, warm_up=False)


if __name__ == "__main__":
    main()
