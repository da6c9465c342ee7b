"""Import HealthBench-size files into PostgreSQL at 1x, 2x and 4x the size, beside the baseline.

For each size the same generated file is imported twice, each time by a fresh process into a
fresh database: once by the baseline (the code at --baseline-ref, main by default, checked out
by the bench into a temporary directory) and once by this checkout. Each import prints CPU
seconds (the process and its PostgreSQL backend), wall time, the memory the import added to the
process (peak resident set during the import minus the set before it) and the load average. The
reference point is the CPU to merely read and parse the file with `json`.

Targets (issue 32, item 5): memory bounded by a chunk, not the file; CPU (process plus
PostgreSQL) within 6x the bare parse.
Usage: .venv/bin/python bench/import_bench.py [--conversations 5000] [--sizes 1,2,4] [--baseline-ref main]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._db import DEFAULT_ADMIN_URL, REPO
from bench.generate import clusters, healthbench_row

CHILD = Path(__file__).resolve().parent / "_import_child.py"
CPU_TARGET = 6.0


def _write_file(path: Path, n: int, seed: int = 0) -> int:
    """Write n generated rows (never all in memory); return the number of criteria."""
    rng, tags, criteria = random.Random(seed), clusters(), 0
    with path.open("w") as f:
        for i in range(n):
            row = healthbench_row(rng, i, tags)
            criteria += len(row["rubrics"])
            f.write(json.dumps(row) + "\n")
    return criteria


def _parse_cpu(path: Path) -> tuple[float, float]:
    """(CPU, wall) seconds to read and json-parse every line, nothing kept."""
    cpu, wall = time.process_time(), time.perf_counter()
    with path.open("rb") as f:
        for raw in f:
            json.loads(raw)
    return time.process_time() - cpu, time.perf_counter() - wall


def _parse_kept_cpu(path: Path) -> float:
    """CPU seconds to json-parse every line into a list kept whole (the bench's figure before)."""
    cpu = time.process_time()
    with path.open("rb") as f:
        parsed = [json.loads(raw) for raw in f]
    spent = time.process_time() - cpu
    del parsed
    return spent


def _baseline_tree(ref: str) -> Path:
    tree = Path(tempfile.mkdtemp(prefix="import-bench-baseline-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _import(code: Path, path: Path, database: str, again: bool) -> dict:
    env = {**os.environ, "BENCH_ADMIN_DATABASE_URL": os.environ.get("BENCH_ADMIN_DATABASE_URL", DEFAULT_ADMIN_URL)}
    command = [sys.executable, str(CHILD), str(code), str(path), database] + (["--again"] if again else [])
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"import with {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _line(label: str, figures: dict, parse_cpu: float) -> str:
    cpu = figures["cpu_process"] + figures["cpu_postgres"]
    return (
        f"  {label:9} CPU {cpu:6.2f} s ({figures['cpu_process']:5.2f} process + {figures['cpu_postgres']:5.2f} "
        f"PostgreSQL) = {cpu / parse_cpu:5.1f}x parse   wall {figures['wall']:6.2f} s   "
        f"memory +{figures['memory_mb']:6.1f} MB   load {figures['load']:5.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5000, help="rows at 1x (the public file has 5,000)")
    parser.add_argument("--sizes", default="1,2,4", help="multiples of --conversations to import")
    parser.add_argument("--baseline-ref", default="main", help="git ref of the baseline code")
    parser.add_argument("--database", default="healthbench_bench_import")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="import-bench-"))
    baseline = _baseline_tree(args.baseline_ref)
    results = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            n = args.conversations * size
            path = tmp / f"healthbench-{size}x.jsonl"
            criteria = _write_file(path, n)
            parse_cpu, parse_wall = _parse_cpu(path)
            kept = _parse_kept_cpu(path)
            mb = path.stat().st_size / 1e6
            print(f"{size}x: {n} conversations, {criteria} criteria, {mb:.1f} MB", flush=True)
            print(
                f"  parse     CPU {parse_cpu:6.2f} s (json.loads of every line)   wall {parse_wall:6.2f} s   "
                f"({kept:.2f} s CPU keeping every row in a list)"
            )
            again = size == 1
            base = _import(baseline, path, args.database + "_base", again)
            print(_line(f"baseline ({args.baseline_ref})", base, parse_cpu))
            this = _import(REPO, path, args.database, again)
            print(_line("this", this, parse_cpu))
            if again:
                print(_line("baseline re-import", base["again"], parse_cpu))
                print(_line("this re-import", this["again"], parse_cpu))
            assert this["conversations"] == n, this
            assert this["criteria"] == criteria, this
            results.append((size, mb, parse_cpu, base, this, kept))
            path.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(baseline, ignore_errors=True)

    print("\nsize   MB    parse CPU | baseline CPU  ratio  memory | this CPU  ratio  memory")
    for size, mb, parse_cpu, base, this, _ in results:
        b_cpu = base["cpu_process"] + base["cpu_postgres"]
        t_cpu = this["cpu_process"] + this["cpu_postgres"]
        print(
            f"{size:3}x {mb:6.1f} {parse_cpu:8.2f} s | {b_cpu:8.2f} s {b_cpu / parse_cpu:5.1f}x "
            f"{base['memory_mb']:6.1f} MB | {t_cpu:6.2f} s {t_cpu / parse_cpu:5.1f}x {this['memory_mb']:6.1f} MB"
        )
    worst = max((this["cpu_process"] + this["cpu_postgres"]) / parse_cpu for _, _, parse_cpu, _, this, _ in results)
    worst_kept = max((this["cpu_process"] + this["cpu_postgres"]) / kept for *_, this, kept in results)
    memory = [this["memory_mb"] for *_, this, _ in results]
    flat = max(memory) <= 1.5 * min(memory) + 20
    print(
        f"CPU within {CPU_TARGET:.0f}x the parse at every size: {'yes' if worst <= CPU_TARGET else 'NO'} "
        f"({worst:.1f}x; {worst_kept:.1f}x the parse that keeps every row)"
    )
    sizes = ", ".join(f"{m:.0f}" for m in memory)
    print(f"memory flat across sizes (bounded by a chunk): {'yes' if flat else 'NO'} ({sizes} MB)")


if __name__ == "__main__":
    main()
