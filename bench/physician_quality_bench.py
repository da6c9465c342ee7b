"""Physician quality pages at the paper's size: 262 physicians, 60,896 labels on shared items.

Builds the planted programme (tests/physician_programme.py) at that size in a scratch
PostgreSQL database, then times, in one process and one run, the new pages beside the
baseline: today's Physicians page (/curator/physicians/), which lists the same physicians.
Each page is fetched once cold (the programme's figures computed; the quality pages then keep
them in the cache until a label, answer, event or removal changes them) and then `--rounds`
times warm; the figures are wall milliseconds (median and max), CPU seconds of this process
(the database's own CPU is not counted), and the load average.

Then, `--rounds-after-change` times, the overview's first request after a change (a new label
saved through the label service, which queues the background refresh): served from the stored
figures with the "updating" note while the refresh is pending; the refresh itself (the
worker's task, run here in-process so its CPU is measured apart); the first request after it;
and, as the baseline, the same request when no refresh is coming, which computes the figures
on the request as the page did before (today's path). The broker is Celery's in-memory one:
the queued message is never consumed, the bench runs the refresh itself.

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


def _once(client, path: str, note: bool) -> tuple[float, float]:
    started, cpu_started = time.perf_counter(), time.process_time()
    response = client.get(path)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    assert response.status_code == 200, (path, response.status_code)
    assert ("Updating…" in response.content.decode()) is note, path
    return wall, cpu


def _call(function) -> tuple[float, float]:
    started, cpu_started = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - started, time.process_time() - cpu_started


def _after_change(client, planted, rounds: int) -> dict[str, list[tuple[float, float]]]:
    from annotation.models import PhysicianQualityStore
    from annotation.services.labels import label_record
    from grading.physicians.refresh import quality_refresh
    from tests.physician_programme import new_label_task

    path = "/curator/physicians/quality/"
    quality_refresh()  # the figures a worker stored after the last change
    out: dict[str, list[tuple[float, float]]] = {"background": [], "refresh": [], "after": [], "inline": []}
    for r in range(rounds):
        who = planted.physicians[10 + r]
        label_record(task=new_label_task(who), met=bool(r % 2))  # queues the refresh
        out["background"].append(_once(client, path, note=True))
        out["refresh"].append(_call(quality_refresh))
        out["after"].append(_once(client, path, note=False))
        # The baseline: a change and no refresh coming, so the request computes the figures.
        label_record(task=new_label_task(who), met=not r % 2)
        PhysicianQualityStore.objects.update(requested_at=None, queued_at=None)
        out["inline"].append(_once(client, path, note=False))
        quality_refresh()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rounds-after-change", type=int, default=5)
    parser.add_argument("--database", default="healthbench_bench_physician_quality")
    args = parser.parse_args()
    os.environ.setdefault("CELERY_BROKER_URL", "memory://")
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
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    after = _after_change(client, planted, args.rounds_after_change)
    print(f"\noverview after a change, {args.rounds_after_change} rounds")
    print(f"{'case':58} {'median ms':>10} {'max ms':>8} {'CPU s med':>10} {'CPU s max':>10}")
    for key, name in (
        ("background", "first request, refresh pending (stored figures, updating)"),
        ("refresh", "the background refresh itself (worker's task)"),
        ("after", "first request after the refresh"),
        ("inline", "baseline: computed on the request (today's path)"),
    ):
        walls, cpus = [w for w, _ in after[key]], [c for _, c in after[key]]
        print(
            f"{name:58} {statistics.median(walls) * 1000:10.0f} {max(walls) * 1000:8.0f}"
            f" {statistics.median(cpus):10.3f} {max(cpus):10.3f}"
        )
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
