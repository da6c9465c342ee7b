"""Soak: many grading runs through one real Celery worker (4 pool processes) on PostgreSQL and
Redis, as a programme launches them (some one after another, some overlapping), counting the
batches that waited unclaimed while a worker process was free.

Definition (printed with the figures). A batch waits from t0, when it is published (first seen
`queued`, or seen going back to `queued` from `running`), to t1, when it is next claimed (its
`claims` goes up). Its *free wait* is the time in [t0, t1] during which fewer than
--worker-processes batches were `running` in the database, i.e. a pool process had nothing to
do. A batch that "waited while a worker was free" is one whose free wait exceeded --bound
(60 s). A sampler polls the RunBatch rows every 0.5 s; at each poll it also reads the broker
(the queue's Redis lists and the `unacked` hash of messages the worker holds) and notes where
each waiting batch's message was: in the queue, held by the worker (with or without a
countdown), or nowhere. Target: no such batch.

Also printed: how many batches the reconciler published again and the stall sweep queued again
(from the worker's log), per-run time and grades/s, the CPU seconds of the worker (its main
process and pool processes, replaced ones included) beside wall time, and the load average.

The baseline is the code before the reconciler existed (the parent of the commit that added
grading/pipeline/reconcile.py), checked out with `git archive` into a temporary directory and
soaked the same way in a subprocess, with a database, Redis database and queue of its own.

Usage: .venv/bin/python bench/soak_bench.py [--runs 20] [--grades 6000] [--latency 0.2]
       [--concurrency 120] [--overlap 2] [--redis-db 11] [--no-baseline]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# The test LLM server listens on 127.0.0.1: a loopback endpoint, for this process and its worker.
os.environ.setdefault("ENDPOINT_ALLOW_PRIVATE_NETWORKS", "1")

SAMPLE_SECONDS = 0.5
WHERE = ("queue", "held", "held with countdown", "nowhere")


def reconcile_commit() -> str | None:
    """The commit that added the reconciler (its parent is the baseline)."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "log", "--diff-filter=A", "--format=%H", "--", "grading/pipeline/reconcile.py"],
        capture_output=True,
        text=True,
    ).stdout.split()
    return out[-1] if out else None


# --- the child: one soak on one checkout ------------------------------------------------------


def tree_cpu(root: int) -> float:
    """CPU seconds of a process and its descendants, those that ended and were reaped included
    (a pool process replaced after its hundredth task), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent_of, cpu = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent_of[int(entry.name)] = int(fields[1])
        # utime, stime, and the same of its children that ended and were waited for
        cpu[int(entry.name)] = sum(int(f) for f in fields[11:15]) / ticks
    total = 0.0
    for pid in cpu:
        p = pid
        while p and p != root:
            p = parent_of.get(p, 0)
        if p == root:
            total += cpu[pid]
    return total


def message_batch(raw: bytes | str) -> tuple[int | None, bool]:
    """(batch id, has a countdown) of a grade_batch message as Redis holds it."""
    try:
        message = json.loads(raw)
        if isinstance(message, list):  # the unacked hash holds [message, exchange, routing key]
            message = message[0]
        headers = message.get("headers") or {}
        if not str(headers.get("task", "")).endswith("grade_batch"):
            return None, False
        args = ast.literal_eval(str(headers.get("argsrepr")))
        return (args[0] if args and isinstance(args[0], int) else None), bool(headers.get("eta"))
    except (ValueError, SyntaxError, TypeError, AttributeError, IndexError):
        return None, False


class Sampler(threading.Thread):
    """Polls the batches and the broker every SAMPLE_SECONDS; keeps each wait's interval."""

    def __init__(self, redis_url: str, queue: str, processes: int):
        super().__init__(daemon=True)
        import redis

        self.redis = redis.Redis.from_url(redis_url)
        self.queue = queue
        self.processes = processes
        self.stop = threading.Event()
        self.open: dict[int, dict] = {}  # batch id -> the wait in progress
        self.claims: dict[int, int] = {}
        self.waits: list[dict] = []
        self.max_queue = 0
        self.max_held = 0
        self.polls = 0
        self.loads: list[float] = []

    def broker(self) -> tuple[dict[int, str], int, int]:
        where: dict[int, str] = {}
        lists = [k for k in self.redis.scan_iter(match=f"{self.queue}*") if self.redis.type(k) == b"list"]
        queued = 0
        for key in lists:
            for raw in self.redis.lrange(key, 0, -1):
                queued += 1
                batch_id, _ = message_batch(raw)
                if batch_id is not None:
                    where[batch_id] = "queue"
        held = self.redis.hvals("unacked")
        for raw in held:
            batch_id, eta = message_batch(raw)
            if batch_id is not None and batch_id not in where:
                where[batch_id] = "held with countdown" if eta else "held"
        return where, queued, len(held)

    def poll(self, now: float) -> None:
        from grading.models import RunBatch

        rows = list(RunBatch.objects.filter(run__name__startswith="soak-").values_list("id", "status", "claims"))
        running = sum(1 for _, status, _ in rows if status == RunBatch.Status.RUNNING)
        where, queued, held = self.broker()
        self.max_queue, self.max_held = max(self.max_queue, queued), max(self.max_held, held)
        self.polls += 1
        self.loads.append(os.getloadavg()[0])
        for batch_id, status, claims in rows:
            wait = self.open.get(batch_id)
            if wait is not None and claims > self.claims.get(batch_id, 0):
                wait["wait"] = now - wait["t0"]
                self.waits.append(self.open.pop(batch_id))
                wait = None
            self.claims[batch_id] = claims
            if status == RunBatch.Status.QUEUED:
                if wait is None:
                    wait = self.open[batch_id] = {"batch": batch_id, "t0": now, "free": 0.0, "where": Counter()}
                wait["where"][where.get(batch_id, "nowhere")] += 1
        # The interval since the last poll counts as free when a process had nothing to do.
        if running < self.processes:
            for wait in self.open.values():
                wait["free"] += SAMPLE_SECONDS
        if self.open:
            self.longest_open = max(now - w["t0"] for w in self.open.values())

    def run(self) -> None:
        from django.db import connection

        try:
            while not self.stop.is_set():
                started = time.monotonic()
                self.poll(started)
                self.stop.wait(max(0.0, SAMPLE_SECONDS - (time.monotonic() - started)))
            self.poll(time.monotonic())
            now = time.monotonic()
            for wait in self.open.values():  # still waiting when the soak ended
                wait["wait"] = now - wait["t0"]
                self.waits.append(wait)
        finally:
            connection.close()


def start_worker(args, log: Path, *, processes: int, name: str = "soak", **env_extra: str) -> subprocess.Popen:
    env = {**os.environ, "LOG_LEVEL": "INFO", **env_extra}
    command = [sys.executable, "-m", "celery", "-A", "healthbench_web", "worker", "--loglevel", "INFO"]
    command += ["--concurrency", str(processes), "--without-gossip", "--without-mingle"]
    command += ["--hostname", f"{name}-{os.getpid()}@%h", *args.worker_option]
    worker = subprocess.Popen(
        command, cwd=Path.cwd(), env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while " ready." not in log.read_text(errors="replace"):
        if time.monotonic() > deadline or worker.poll() is not None:
            raise SystemExit(f"the worker did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    time.sleep(1)  # let the pool's processes finish starting
    return worker


def programme(n_runs: int, overlap: int) -> list[list[int]]:
    """Groups of run numbers launched together: the first half one at a time, then `overlap` at a time."""
    sequential = n_runs // 2
    groups = [[i] for i in range(sequential)]
    rest = list(range(sequential, n_runs))
    groups += [rest[i : i + overlap] for i in range(0, len(rest), overlap)]
    return groups


def child(args) -> None:
    """One soak on the code of the current directory; prints its figures as a JSON line."""
    os.chdir(args.child)
    sys.path.insert(0, str(Path(args.child)))
    redis_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    os.environ["REDIS_URL"] = redis_url
    os.environ["CELERY_QUEUE_PREFIX"] = f"bench-soak-{os.getpid()}"
    import redis

    redis.Redis.from_url(redis_url).flushdb()  # its own database number
    from bench._db import fresh_postgres

    fresh_postgres(args.database)
    from django.conf import settings

    from bench.grading_bench import build_source
    from grading.models import Endpoint, Run
    from grading.pipeline.run_launch import run_launch
    from grading.pipeline.run_request import RunRequest
    from tests.llm_server import LLMServer

    server = LLMServer(latency=args.latency).start()
    source = build_source(args.grades)
    grader = Endpoint.objects.create(
        name="soak", base_url=server.url, key_variable="", timeout_seconds=30, model="grader", temperature=0.0
    )
    log = Path(tempfile.mkstemp(suffix=".log")[1])
    worker = start_worker(args, log, processes=args.worker_processes)
    foreign = None
    if args.foreign_worker:
        # Another deployment's worker on the same Redis and queue names: a database of its own
        # (empty, migrated), so it holds none of these batches.
        import psycopg

        foreign_db = f"{args.database}_foreign"
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{foreign_db}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{foreign_db}" TEMPLATE template0')
        foreign_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + foreign_db
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], env={**os.environ, "DATABASE_URL": foreign_url}, check=True
        )
        foreign_log = Path(tempfile.mkstemp(suffix=".log")[1])
        foreign = start_worker(args, foreign_log, processes=1, name="foreign", DATABASE_URL=foreign_url)
    sampler = Sampler(redis_url, settings.CELERY_GRADING_QUEUE, args.worker_processes)
    runs: list[dict] = []
    load_before = os.getloadavg()
    cpu_before = tree_cpu(worker.pid)
    start = time.monotonic()
    sampler.start()
    try:
        for group in programme(args.runs, args.overlap):
            launched = []
            for i in group:
                run = run_launch(
                    spec=RunRequest(
                        name=f"soak-{i:02d}",
                        grader=grader,
                        responses_from=source,
                        concurrency=args.concurrency,
                        use_cache=False,
                    )
                )
                launched.append((i, run, time.monotonic()))
            for i, run, t0 in launched:
                deadline = t0 + args.run_timeout
                while Run.objects.filter(id=run.id, status=Run.Status.RUNNING).exists():
                    if time.monotonic() > deadline:
                        Run.objects.filter(id=run.id).update(status=Run.Status.CANCELLED)
                        break
                    time.sleep(0.1)
                run.refresh_from_db()
                elapsed = time.monotonic() - t0
                row = {
                    "run": i,
                    "together": len(group),
                    "status": run.status,
                    "seconds": elapsed,
                    "grades": run.total_items,
                }
                runs.append(row)
                print(
                    f"  run {i:2d} ({len(group)} at a time): {run.status}, {elapsed:6.1f} s, "
                    f"{run.total_items / elapsed:6.1f} grades/s, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        wall = time.monotonic() - start
        sampler.stop.set()
        sampler.join()
        cpu = tree_cpu(worker.pid) - cpu_before
        load_after = os.getloadavg()
        lost = log.read_text(errors="replace").count("WorkerLostError")  # before the shutdown's own
        for process in (worker, foreign):
            if process is not None:
                os.killpg(process.pid, 15)
                process.wait(timeout=60)
        server.stop()
        text = log.read_text(errors="replace")
        kept = Path(args.keep_log) if args.keep_log else None
        if kept:
            shutil.copy(log, kept)
        log.unlink()
    republished = sum(int(n) for n in re.findall(r"reconciler: (\d+) batch", text))
    swept = sum(int(n) for n in re.findall(r"grading sweep queued (\d+) batch", text))
    waits = sampler.waits
    late = [w for w in waits if w["free"] > args.bound]
    result = {
        "runs": runs,
        "wall": wall,
        "cpu": cpu,
        "load_before": load_before[0],
        "load_after": load_after[0],
        "load_mean": sum(sampler.loads) / max(1, len(sampler.loads)),
        "waits": len(waits),
        "late": [{**w, "where": dict(w["where"])} for w in late],
        "max_wait": max((w["wait"] for w in waits), default=0.0),
        "max_free": max((w["free"] for w in waits), default=0.0),
        "where": dict(sum((w["where"] for w in waits if w["free"] > 5), Counter())),
        "max_queue": sampler.max_queue,
        "max_held": sampler.max_held,
        "republished": republished,
        "swept": swept,
        "lost_worker": lost,
        "task_errors": len(re.findall(r"batch \d+ failed \(", text)),
        "polls": sampler.polls,
    }
    print("RESULT " + json.dumps(result), flush=True)


# --- the parent: ours and the baseline, side by side -------------------------------------------


def soak(label: str, tree: Path, args, database: str, redis_db: int) -> dict:
    print(f"\n{label}: {args.runs} runs of {args.grades:,} grades", flush=True)
    command = [sys.executable, str(tree / "bench" / "soak_bench.py"), "--child", str(tree)]
    command += ["--database", database, "--redis-db", str(redis_db), "--runs", str(args.runs)]
    command += ["--grades", str(args.grades), "--latency", str(args.latency), "--concurrency", str(args.concurrency)]
    command += ["--overlap", str(args.overlap), "--worker-processes", str(args.worker_processes)]
    command += ["--bound", str(args.bound), "--run-timeout", str(args.run_timeout)]
    command += [f"--worker-option={option}" for option in args.worker_option]
    command += ["--foreign-worker"] if args.foreign_worker else []
    if args.keep_log:
        command += ["--keep-log", f"{args.keep_log}.{label.split()[0]}"]
    env = {**os.environ, "LOG_LEVEL": os.environ.get("LOG_LEVEL", "WARNING")}
    child_process = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, text=True)
    result = None
    assert child_process.stdout is not None
    for line in child_process.stdout:
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
        else:
            print(line, end="", flush=True)
    if child_process.wait() != 0 or result is None:
        raise SystemExit(f"{label}: the soak failed")
    return result


def report(label: str, r: dict, args) -> None:
    runs = r["runs"]
    grades = sum(row["grades"] for row in runs)
    times = sorted(row["seconds"] for row in runs)
    ended = Counter(row["status"] for row in runs)
    print(f"\n{label}")
    print(f"  runs: {dict(ended)}; {grades:,} grades in {r['wall']:.1f} s wall, {grades / r['wall']:.1f} grades/s")
    print(
        f"  per run: median {times[len(times) // 2]:.1f} s, slowest {times[-1]:.1f} s; "
        f"grades/s per run {min(row['grades'] / row['seconds'] for row in runs):.1f}"
        f"-{max(row['grades'] / row['seconds'] for row in runs):.1f}"
    )
    print(
        f"  worker CPU {r['cpu']:.1f} s ({r['cpu'] * 1000 / max(1, grades):.2f} ms per grade) beside "
        f"{r['wall']:.1f} s wall; load average {r['load_before']:.1f} before, {r['load_mean']:.1f} mean, "
        f"{r['load_after']:.1f} after"
    )
    print(
        f"  batch waits: {r['waits']}; longest {r['max_wait']:.1f} s, longest with a process free "
        f"{r['max_free']:.1f} s; batches that waited > {args.bound:.0f} s with a process free: {len(r['late'])}"
    )
    where = ", ".join(f"{k} {v * SAMPLE_SECONDS:.1f} s" for k, v in r["where"].items()) or "none"
    print(f"  the batches that waited > 5 s with a process free: where their messages were meanwhile: {where}")
    print(
        f"  broker: longest queue {r['max_queue']}, most messages held by the worker {r['max_held']}; "
        f"reconciler published again {r['republished']}, stall/lease sweep queued again {r['swept']}; "
        f"batches failed and handed back {r['task_errors']}; worker lost a process {r['lost_worker']} times"
    )
    for w in r["late"]:
        print(
            f"    batch {w['batch']}: waited {w['wait']:.1f} s, {w['free']:.1f} s of it with a process free, "
            f"{w['where']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--grades", type=int, default=6000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=120)
    parser.add_argument("--overlap", type=int, default=2, help="runs launched together in the second half")
    parser.add_argument("--worker-processes", type=int, default=4)
    parser.add_argument("--bound", type=float, default=60.0, help="seconds a batch may wait with a process free")
    parser.add_argument("--run-timeout", type=float, default=900.0)
    parser.add_argument("--redis-db", type=int, default=11, help="ours; the baseline uses the next one")
    parser.add_argument("--database", default="healthbench_bench_soak")
    parser.add_argument("--baseline", help="commit to soak as the baseline (default: before the reconciler)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--worker-option", action="append", default=[], help="passed to `celery worker`")
    parser.add_argument("--keep-log", help="copy the worker's log to this path (.ours / .baseline)")
    parser.add_argument(
        "--foreign-worker",
        action="store_true",
        help="also start a worker of another database on the same queue (another deployment sharing the Redis)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.redis_db == 0:
        raise SystemExit("--redis-db 0 is shared with the tests and other work; the soak flushes its database")
    if args.child:
        child(args)
        return
    print(
        f"{args.runs} runs x {args.grades:,} grades, concurrency {args.concurrency} per run, server latency "
        f"{args.latency * 1000:.0f} ms, 1 worker x {args.worker_processes} processes, PostgreSQL + Redis, "
        f"{os.cpu_count()} cores; the first {args.runs // 2} runs one at a time, the rest {args.overlap} at a time"
    )
    print(__doc__.split("\n\n")[1])
    results = [("ours", soak("ours (this checkout)", REPO, args, args.database, args.redis_db))]
    added = reconcile_commit()
    baseline = args.baseline or (f"{added}^" if added else None)
    if args.no_baseline:
        print("\nbaseline: skipped (--no-baseline)")
    elif baseline is None:
        print("\nbaseline: none (no commit added grading/pipeline/reconcile.py in this history)")
    else:
        with tempfile.TemporaryDirectory(prefix="soak-baseline-") as tmp:
            tree = Path(tmp)
            archive = subprocess.run(["git", "-C", str(REPO), "archive", baseline], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
            shutil.copy(Path(__file__), tree / "bench" / "soak_bench.py")
            commit = subprocess.run(
                ["git", "-C", str(REPO), "rev-parse", "--short", baseline], capture_output=True, text=True
            ).stdout.strip()
            label = f"baseline (commit {commit}{'' if args.baseline else ', before the reconciler'})"
            results.append((label, soak(label, tree, args, f"{args.database}_baseline", args.redis_db + 1)))
    for label, result in results:
        report(label, result, args)
    late = len(results[0][1]["late"])
    verdict = "met" if late == 0 else f"MISSED ({late})"
    print(f"\ntarget: 0 batches waiting > {args.bound:.0f} s with a process free: {verdict}")


if __name__ == "__main__":
    main()
