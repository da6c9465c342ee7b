"""Physician quality pages at the paper's size: 262 physicians, 60,896 labels on shared items.

Builds the planted programme (tests/physician_programme.py) at that size in a scratch
PostgreSQL database, then times, in one process and one run, the new pages beside the
baseline: today's Physicians page (/curator/physicians/), which lists the same physicians.
Each page is fetched once cold (the programme's figures computed; the quality pages then keep
them in the cache until a label, answer, event or removal changes them) and then `--rounds`
times warm; the figures are wall milliseconds (median and max), CPU seconds of this process
(the database's own CPU is not counted), and the load average.

Usage: .venv/bin/python bench/physician_quality_bench.py [--rounds N] [--database NAME]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._db import fresh_postgres

N_PHYSICIANS = 262
N_LABELS = 60_896


def _time(client, path: str, rounds: int) -> dict[str, float]:
    started, cpu_started = time.perf_counter(), time.process_time()
    response = client.get(path)
    cold, cold_cpu = time.perf_counter() - started, time.process_time() - cpu_started
    assert response.status_code == 200, (path, response.status_code)
    walls = []
    cpu_started = time.process_time()
    for _ in range(rounds):
        started = time.perf_counter()
        response = client.get(path)
        walls.append(time.perf_counter() - started)
    cpu = time.process_time() - cpu_started
    return {
        "cold_ms": cold * 1000,
        "cold_cpu_s": cold_cpu,
        "median_ms": statistics.median(walls) * 1000,
        "max_ms": max(walls) * 1000,
        "cpu_s_per_page": cpu / rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--database", default="healthbench_bench_physician_quality")
    args = parser.parse_args()
    fresh_postgres(args.database)

    from django.test import Client

    from annotation.models import Physician
    from tests.physician_programme import planted_programme
    from tests.workspace import physician

    started = time.perf_counter()
    planted = planted_programme(n_physicians=N_PHYSICIANS, n_labels=N_LABELS)
    print(f"data: {N_PHYSICIANS} physicians, {N_LABELS} labelling answers in {time.perf_counter() - started:.1f} s")
    curator = physician("bench-curator", role=Physician.Role.CURATOR)
    assert curator.user is not None
    assert planted.sloppy.user is not None
    client = Client()
    client.force_login(curator.user)
    own = Client()
    own.force_login(planted.sloppy.user)
    pages = [
        ("baseline: Physicians page (today)", client, "/curator/physicians/"),
        ("Physician quality overview", client, "/curator/physicians/quality/"),
        ("one physician's page (curator)", client, f"/physicians/{planted.slow.code}/quality/"),
        ("one physician's own page", own, f"/physicians/{planted.sloppy.code}/quality/"),
    ]
    print(f"{'page':40} {'cold ms':>8} {'cold CPU s':>10} {'median ms':>10} {'max ms':>8} {'CPU s/page':>11}")
    for name, who, path in pages:
        f = _time(who, path, args.rounds)
        cold = f"{f['cold_ms']:8.0f} {f['cold_cpu_s']:10.3f}"
        print(f"{name:40} {cold} {f['median_ms']:10.0f} {f['max_ms']:8.0f} {f['cpu_s_per_page']:11.3f}")
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
