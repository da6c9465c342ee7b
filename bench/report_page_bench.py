"""A paper-size finished run's report (page, JSON, CSV) in a compose-style environment.

Starts what docker-compose.yml starts, on this machine: PostgreSQL (a fresh database), Redis,
gunicorn with 3 processes (DEBUG off) and 2 Celery workers (one per queue). The run: 5,000
conversations x 16 samples (~1M grades), written by bench/scoring_bench.py's generator.

Timed over HTTP from this process, with 3 client threads (one per gunicorn process):
* warm: --requests requests per download, after the report is in the cache; p50/p95 per
  gunicorn process, read from gunicorn's access log (which names the process), so that
  "warm on every process" is checked, not assumed;
* cold: the first request of each download after the run's report version moved on (what a
  progress step or a run's end does), so the request computes the report itself;
* warmed by a worker: the run's end queues the warm_report task; time until its report
  is in the cache.
Baseline, in the same run, on the same database: today's code (--baseline-ref, the commit
before this issue) served by the same gunicorn, whose reports are cached per process and
checked with an aggregate query over the run's grades on every request.

Targets (issue 15): warm p95 <= 300 ms from every process; cold <= the baseline's cold (median
wall time; the CPU time the request cost the web processes and PostgreSQL is printed beside it,
since on a machine shared with other work the wall time swings by a third between identical
requests).
Also (first, in this process): the finished run's report read back from the database
(grading.reports.stored), as any process does after a cache flush, beside computing it.

Also first: a running run's report recomputed cold (loading, scoring, bootstrap, total, as CPU of
the process and PostgreSQL beside wall time; target <= 2 s of CPU at paper size, issue 32) beside
main before this work (--recompute-baseline-ref), each side in a fresh process per round
(bench/_report_child.py) on the same database, with the bootstrap a new run draws with.

Usage: .venv/bin/python bench/report_page_bench.py [--conversations 5000] [--samples 16] [--reuse]
       [--stored-only] [--recompute-only] [--recompute-rounds 3] [--recompute-baseline-ref REF]
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import DEFAULT_ADMIN_URL  # noqa: E402
from bench._server import wait_for_healthz  # noqa: E402

TARGET_WARM_P95_MS = 300
PRIMING = 6  # requests per download before the measured ones
BASELINE_REF = "f2887d2"  # main before issue 15: per-process cache, fingerprint query per request
RECOMPUTE_BASELINE_REF = "2806953"  # main before issue 32's report work (1ff7d93: before issue 18)
CHILD = REPO / "bench" / "_report_child.py"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
SECRET_KEY = "bench-report-page-" + "x" * 50
DOWNLOADS = ("page", "json", "csv")
ACCESS_FORMAT = "%(p)s %(D)s %(s)s %(U)s"  # worker pid, microseconds, status, path


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _env(tmp: Path, prefix: str) -> dict:
    env = dict(os.environ)
    env.update(
        DEBUG="0",
        SECRET_KEY=SECRET_KEY,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="0",
        STATIC_ROOT=str(tmp / "static"),
        VAR_DIR=str(tmp / "var"),
        LOG_LEVEL="WARNING",
        REDIS_URL=REDIS_URL,
        # This bench's own keys and queues on the shared Redis.
        CACHE_KEY_PREFIX=prefix,
        CELERY_QUEUE_PREFIX=prefix,
    )
    return env


class Server:
    """gunicorn with 3 sync processes from `code_dir`, its access log naming each request's process."""

    def __init__(self, code_dir: Path, port: int, env: dict, log: Path):
        self.log = log
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=code_dir, env=env, check=True
        )
        command = [
            sys.executable,
            "-m",
            "gunicorn",
            "healthbench_web.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "3",
            "--timeout",
            "120",
            "--access-logfile",
            str(log),
            "--access-logformat",
            ACCESS_FORMAT,
        ]
        self.process = subprocess.Popen(
            command, cwd=code_dir, env=env, start_new_session=True, stderr=subprocess.DEVNULL
        )
        self.port = port
        wait_for_healthz(port, timeout=5)

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)

    def access(self) -> list[tuple[int, float, str]]:
        """(process id, server milliseconds, path) per request so far."""
        out = []
        for line in self.log.read_text().splitlines():
            pid, micros, _status, path = line.split(" ", 3)
            out.append((int(pid.strip("<>")), int(micros) / 1000, path))
        return out


def _workers(env: dict, log: Path) -> list[subprocess.Popen]:
    from django.conf import settings

    workers = []
    for queue in (settings.CELERY_SAMPLING_QUEUE, settings.CELERY_GRADING_QUEUE):
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "healthbench_web",
            "worker",
            "-Q",
            queue,
            "--concurrency",
            "1",
            "--hostname",
            f"{queue}@%h",
            "--without-gossip",
            "--without-mingle",
        ]
        workers.append(
            subprocess.Popen(
                command,
                cwd=REPO,
                env={**env, "LOG_LEVEL": "INFO"},
                start_new_session=True,
                stdout=log.open("ab"),
                stderr=subprocess.STDOUT,
            )
        )
    deadline = time.monotonic() + 60
    while log.read_text().count(" ready.") < 2:
        if time.monotonic() > deadline:
            raise SystemExit(f"the workers did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return workers


def _cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU time per process, from /proc (Linux)."""
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return out


def _serving_pids(server: "Server") -> list[int]:
    """The gunicorn processes of `server` and the PostgreSQL backends of the bench database."""
    from django.db import connection

    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
    pids = [int(pid) for pid in children.read_text().split()] if children.exists() else []
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return pids + [row[0] for row in cursor.fetchall()]


def _cold_get(server: "Server", path: str, cookie: str) -> tuple[float, float]:
    """(wall milliseconds, CPU seconds of the web processes and the database) of one request.
    On a machine shared with other work the CPU time is the steadier of the two."""
    before = _cpu_seconds(_serving_pids(server))
    elapsed = _get(server.port, path, cookie)[0]
    # A process may have opened a database connection during the request: its backend is new.
    after = _cpu_seconds(_serving_pids(server))
    return elapsed, sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _get(port: int, path: str, cookie: str) -> tuple[float, int, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start = time.perf_counter()
    conn.request("GET", path, headers={"Cookie": f"sessionid={cookie}", "Host": "127.0.0.1"})
    response = conn.getresponse()
    body = response.read()
    elapsed = (time.perf_counter() - start) * 1000
    conn.close()
    if response.status != 200:
        raise SystemExit(f"{path}: HTTP {response.status}\n{body[:500]!r}")
    return elapsed, response.status, len(body)


def _paths(code: str) -> dict[str, str]:
    return {"page": f"/reports/{code}/", "json": f"/reports/{code}/report.json", "csv": f"/reports/{code}/report.csv"}


def _warm(server: Server, paths: dict[str, str], cookie: str, requests: int) -> dict[str, dict[int, list[float]]]:
    """--requests per download from 3 threads; server-side milliseconds per download and process."""
    before = len(server.access())
    jobs = [path for path in paths.values() for _ in range(requests)]
    lock = threading.Lock()

    def client() -> None:
        while True:
            with lock:
                if not jobs:
                    return
                path = jobs.pop()
            _get(server.port, path, cookie)

    threads = [threading.Thread(target=client) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(0.3)  # the access log is written after the response
    by_path = {path: name for name, path in paths.items()}
    out: dict[str, dict[int, list[float]]] = {name: defaultdict(list) for name in paths}
    for pid, ms, path in server.access()[before:]:
        if path in by_path:
            out[by_path[path]][pid].append(ms)
    return out


def _summary(per_process: dict[int, list[float]]) -> str:
    every = [ms for values in per_process.values() for ms in values]
    worst = max(_percentile(values, 0.95) for values in per_process.values())
    return (
        f"p50 {statistics.median(every):7.0f} ms  p95 {_percentile(every, 0.95):7.0f} ms  "
        f"worst process p95 {worst:7.0f} ms  ({len(per_process)} processes, {len(every)} requests)"
    )


def _bump(run_id: int) -> None:
    from django.db.models import F

    from grading.models import Run

    Run.objects.filter(id=run_id).update(report_version=F("report_version") + 1)


def _fingerprint_changes(run, count: int):
    """Each step marks one more not-met grade as met: a new fingerprint for today's cache, and so
    a cold request on whichever process takes it (the report barely changes)."""
    from grading.models import Grade

    ids = list(Grade.objects.filter(run=run, met=False).values_list("id", flat=True)[:count])
    for grade_id in ids:
        Grade.objects.filter(id=grade_id).update(met=True)
        yield grade_id


def _data(args):
    """The run (built, or with --reuse taken from the previous database) and a researcher's session."""
    admin_url = os.environ.get("BENCH_ADMIN_DATABASE_URL", DEFAULT_ADMIN_URL)
    if args.reuse:
        os.environ["DATABASE_URL"] = f"{admin_url.rsplit('/', 1)[0]}/{args.database}"
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from grading.models import Run

        run = Run.objects.get(name="bench")
        from grading.models import Grade

        n_grades = Grade.objects.filter(run=run).count()
    else:
        from bench._db import fresh_postgres
        from bench.scoring_bench import load_run

        fresh_postgres(args.database)
        start = time.perf_counter()
        run, n_grades = load_run(args.conversations, args.samples)
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        print(f"data: loaded in {time.perf_counter() - start:.0f} s (not timed)")
    from django.contrib.auth.models import User
    from django.test import Client

    from annotation.models import Physician

    user, created = User.objects.get_or_create(username="bench-researcher")
    if created:
        Physician.objects.create(user=user, role=Physician.Role.RESEARCHER)
    client = Client()
    client.force_login(user)
    return run, n_grades, client.cookies["sessionid"].value


def _baseline_tree(ref: str) -> Path:
    tree = Path(tempfile.mkdtemp(prefix="report-bench-baseline-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _stored_figures(run, rounds: int) -> None:
    """A finished run's report as a cache miss reads it back from the database (what every
    process does after a cache flush or a restart), beside computing it from the grades, which
    is what the same miss cost before reports were stored. In this process, one query each."""
    from django.db import connection

    from grading.models import StoredReport
    from grading.reports.report import run_report, run_report_stored

    run.refresh_from_db()
    StoredReport.objects.filter(run=run).delete()
    computed = []
    for _ in range(2):
        start = time.perf_counter()
        run_report(run=run)
        computed.append(time.perf_counter() - start)
    run_report_stored(run=run, seed=0)  # computes and stores it, as the run's end does
    size = StoredReport.objects.get(run=run, kind=StoredReport.Kind.REPORT).payload
    reads = []
    for _ in range(rounds):
        connection.close()  # a fresh connection each time, as another process would have
        start = time.perf_counter()
        run_report_stored(run=run, seed=0)
        reads.append(time.perf_counter() - start)
    p50, p95 = statistics.median(reads) * 1000, _percentile(reads, 0.95) * 1000
    cold = statistics.median(computed) * 1000
    print(f"stored report, read back after a cache flush ({rounds} reads, {len(bytes(size)) / 1e6:.1f} MB stored):")
    print(f"  p50 {p50:.0f} ms, p95 {p95:.0f} ms (target <= 100 ms)")
    print(f"  baseline, today's cache miss: the report computed from the grades, median {cold:.0f} ms")
    print(f"  ratio: {cold / p95:.0f}x faster at p95")


def _recompute_figures(run, rounds: int, baseline_ref: str) -> None:
    """A running run's report recomputed at a progress step (no cache, no stored report): loading
    the grades, scoring, the bootstrap and the whole report, as CPU (the process and its
    PostgreSQL backend) beside wall time, with the bootstrap a new run draws with. Each side in
    a fresh process per round (bench/_report_child.py), interleaved round by round: the
    baseline's code checked out from git, ours from this checkout, on the same database."""
    url = os.environ["DATABASE_URL"]  # the bench database, set by _data
    tree = _baseline_tree(baseline_ref)
    measured: dict[str, list[dict]] = {"baseline": [], "new": []}
    try:
        for _ in range(rounds):
            for side, code in (("baseline", tree), ("new", REPO)):
                env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(code), "LOG_LEVEL": "WARNING"}
                done = subprocess.run(
                    [sys.executable, str(CHILD), "1"], cwd=code, env=env, capture_output=True, text=True, check=False
                )
                if done.returncode:
                    raise SystemExit(f"the {side} recompute failed:\n{done.stderr[-3000:]}")
                measured[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(tree, ignore_errors=True)

    def median(side: str, part: str, key: str) -> float:
        return statistics.median(m["rounds"][part][0][key] for m in measured[side])

    def cpu(side: str, part: str) -> float:
        return statistics.median(
            m["rounds"][part][0]["process"] + m["rounds"][part][0]["database"] for m in measured[side]
        )

    print(
        f"cold recompute of the report (median of {rounds}, interleaved with the baseline, {baseline_ref}); "
        f"bootstrap: ours {measured['new'][0]['bootstrap']}, baseline {measured['baseline'][0]['bootstrap']}; "
        f"load {median('new', 'total', 'load'):.1f}:"
    )
    for part in ("loading", "scoring", "bootstrap", "total"):
        target = " (target <= 2 s of CPU)" if part == "total" else ""
        print(
            f"  {part:9}: CPU {cpu('new', part):.2f} s (PostgreSQL {median('new', part, 'database'):.2f}), "
            f"wall {median('new', part, 'wall'):.2f} s; baseline CPU {cpu('baseline', part):.2f} s "
            f"(PostgreSQL {median('baseline', part, 'database'):.2f}), wall {median('baseline', part, 'wall'):.2f} s; "
            f"{cpu('baseline', part) / max(cpu('new', part), 1e-3):.1f}x less CPU{target}"
        )
    memory = statistics.median(m["memory_mb"] for m in measured["new"])
    base_memory = statistics.median(m["memory_mb"] for m in measured["baseline"])
    print(f"  memory added by the report: {memory:.0f} MB, baseline {base_memory:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--database", default="healthbench_bench_report")
    parser.add_argument("--requests", type=int, default=30, help="warm requests per download")
    parser.add_argument("--cold-rounds", type=int, default=3, help="cold requests per download and side")
    parser.add_argument("--baseline-ref", default=BASELINE_REF)
    parser.add_argument("--port", type=int, default=8751)
    parser.add_argument("--reuse", action="store_true", help="reuse the database of the previous run")
    parser.add_argument(
        "--stored-only", action="store_true", help="only time the stored report against computing it (no servers)"
    )
    parser.add_argument(
        "--recompute-only",
        action="store_true",
        help="only time a cold recompute of the report against --recompute-baseline-ref (no servers)",
    )
    parser.add_argument("--recompute-rounds", type=int, default=3, help="cold recomputes per side")
    parser.add_argument(
        "--recompute-baseline-ref", default=RECOMPUTE_BASELINE_REF, help="the commit the recompute is measured against"
    )
    args = parser.parse_args()

    prefix = f"bench-report-{uuid.uuid4().hex[:8]}"
    tmp = Path(tempfile.mkdtemp(prefix="report-bench-"))
    env = _env(tmp, prefix)
    os.environ.update({k: env[k] for k in ("REDIS_URL", "CACHE_KEY_PREFIX", "CELERY_QUEUE_PREFIX", "SECRET_KEY")})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")
    run, n_grades, cookie = _data(args)
    env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    paths = _paths(str(run.code))
    print(f"run: {args.conversations} conversations x {args.samples} samples, {n_grades:,} grades (finished)")
    _recompute_figures(run, rounds=args.recompute_rounds, baseline_ref=args.recompute_baseline_ref)
    if args.recompute_only:
        return
    _stored_figures(run, rounds=30)
    if args.stored_only:
        return

    # Both servers up, the cold measurements interleaved download by download and repeated: on a
    # shared machine the load drifts, and measuring one side after the other would credit the
    # drift to a side. Each side's median over the rounds is compared.
    tree = _baseline_tree(args.baseline_ref)
    # Today's code keeps its cache in each process; its own static files.
    base_env = {**env, "REDIS_URL": "", "STATIC_ROOT": str(tmp / "static-baseline")}
    worker_log = tmp / "workers.log"
    workers = _workers(env, worker_log)
    server = Server(REPO, args.port, env, tmp / "access.log")
    baseline = Server(tree, args.port + 1, base_env, tmp / "baseline-access.log")
    invalidate_baseline = _fingerprint_changes(run, args.cold_rounds * len(DOWNLOADS))
    # Per download: (wall milliseconds, CPU seconds) of each cold request.
    base_colds: dict[str, list[tuple[float, float]]] = defaultdict(list)
    colds: dict[str, list[tuple[float, float]]] = defaultdict(list)
    try:
        # Every process's first request pays for imports and template loading: not what is measured.
        for side in (server, baseline):
            _warm(side, {"list": "/reports/"}, cookie, PRIMING)
        for _ in range(args.cold_rounds):
            for name, path in paths.items():
                next(invalidate_baseline)  # today's cache key: an aggregate over the run's grades
                base_colds[name].append(_cold_get(baseline, path, cookie))
                _bump(run.id)  # a progress step: the next request computes
                colds[name].append(_cold_get(server, path, cookie))
        base_cold = {name: statistics.median(ms for ms, _ in values) for name, values in base_colds.items()}
        cold = {name: statistics.median(ms for ms, _ in values) for name, values in colds.items()}
        base_cpu = {name: statistics.median(cpu for _, cpu in values) for name, values in base_colds.items()}
        cpu = {name: statistics.median(cpu for _, cpu in values) for name, values in colds.items()}
        # Each baseline process computes the report once for itself: let them, so that warm is warm.
        _warm(baseline, paths, cookie, PRIMING)
        base_warm = _warm(baseline, paths, cookie, args.requests)
        baseline.stop()
        _warm(server, paths, cookie, PRIMING)
        warm = _warm(server, paths, cookie, args.requests)

        # The run's end queues the warm-up in a worker: how long until every process reads it warm.
        from django.core.cache import cache
        from django.db import transaction

        from grading.pipeline.runs import report_warm
        from grading.reports.report import report_cache_key

        _bump(run.id)
        run.refresh_from_db()
        start = time.perf_counter()
        with transaction.atomic():
            report_warm(run_id=run.id)
        key = f"{report_cache_key(run=run, seed=0)}:v{run.report_version}"
        while cache.get(key) is None:
            if time.perf_counter() - start > 300:
                raise SystemExit(f"the worker did not warm the report:\n{worker_log.read_text()[-3000:]}")
            time.sleep(0.1)
        warmed_in = time.perf_counter() - start
        after_worker = _get(server.port, paths["page"], cookie)[0]
    finally:
        server.stop()
        if baseline.process.poll() is None:
            baseline.stop()
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)
        shutil.rmtree(tree, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nbaseline  today's code ({args.baseline_ref}): per-process cache, a fingerprint query on every request")
    for name in DOWNLOADS:
        print(
            f"  {name:5} cold {base_cold[name]:6.0f} ms {base_cpu[name]:5.2f} s CPU   warm {_summary(base_warm[name])}"
        )
    print("ours      shared Redis cache keyed by the run's report version")
    print(f"          (cold: median of {args.cold_rounds} rounds interleaved with the baseline's; CPU of the web")
    print("          processes and the database during the request)")
    for name in DOWNLOADS:
        print(f"  {name:5} cold {cold[name]:6.0f} ms {cpu[name]:5.2f} s CPU   warm {_summary(warm[name])}")
    print(
        f"  worker warm-up after the run's end: report in the cache after {warmed_in:.1f} s; "
        f"next page request {after_worker:.0f} ms"
    )
    print("ratio")
    failures = []
    for name in DOWNLOADS:
        ours_p95 = max(_percentile(v, 0.95) for v in warm[name].values())
        base_p95 = _percentile([ms for v in base_warm[name].values() for ms in v], 0.95)
        print(
            f"  {name:5} warm p95 {base_p95 / ours_p95:5.1f}x faster; cold {cold[name] / base_cold[name]:4.2f}x "
            f"the baseline's time, {cpu[name] / base_cpu[name]:4.2f}x its CPU"
        )
        if ours_p95 > TARGET_WARM_P95_MS:
            failures.append(f"{name} warm p95 {ours_p95:.0f} ms > {TARGET_WARM_P95_MS} ms")
        if len(warm[name]) < 3:
            failures.append(f"{name}: only {len(warm[name])} gunicorn processes answered")
        if cold[name] > base_cold[name]:
            failures.append(f"{name} cold {cold[name]:.0f} ms > baseline cold {base_cold[name]:.0f} ms")
    print("target    warm p95 <= 300 ms on every process, cold <= baseline cold: " + ("; ".join(failures) or "met"))


if __name__ == "__main__":
    main()
