"""Run in a code tree (this checkout or a baseline's, as the working directory and PYTHONPATH) by
bench/scoring_bench.py and bench/report_page_bench.py: times the bench run's report with that
tree's code on the database of DATABASE_URL, and prints one JSON line.

The run's report is drawn with the bootstrap a new run of that tree draws with (Run.bootstrap's
default). Per round: the whole report (grading.reports.report.run_report), then its parts:
loading (run_grades_get), scoring (score_grades) and the bootstrap (aggregate_columns). Each as
wall seconds, the CPU seconds of this process (every thread) and of its PostgreSQL backend (from
/proc, Linux), and the load average. Memory: the peak resident set of the process minus its set
before the first report, in MB.

Usage: python bench/_report_child.py ROUNDS (from the tree to measure)
"""

import json
import os
import resource
import sys
import time
from pathlib import Path


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")
    import django

    django.setup()
    from django.db import connection

    from grading.models import Run
    from grading.reports import scoring, selectors
    from grading.reports.report import run_report

    run = Run.objects.get(name="bench")
    run.bootstrap = Run._meta.get_field("bootstrap").default
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    ticks = os.sysconf("SC_CLK_TCK")

    def backend_cpu() -> float:
        fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    def timed(call):
        wall, process, database = time.perf_counter(), time.process_time(), backend_cpu()
        value = call()
        return value, {
            "wall": time.perf_counter() - wall,
            "process": time.process_time() - process,
            "database": backend_cpu() - database,
            "load": os.getloadavg()[0],
        }

    before = _rss_mb()
    report = run_report(run=run)  # untimed: imports and the first queries, as a serving process has done
    rounds: dict[str, list[dict]] = {"total": [], "loading": [], "scoring": [], "bootstrap": []}
    for _ in range(int(sys.argv[1])):
        report, figures = timed(lambda: run_report(run=run))
        rounds["total"].append(figures)
        grades, figures = timed(lambda: selectors.run_grades_get(run=run))
        rounds["loading"].append(figures)
        scores, figures = timed(lambda g=grades: scoring.score_grades(**g.score_arrays()))
        rounds["scoring"].append(figures)
        _, figures = timed(lambda s=scores: scoring.aggregate_columns(s["metrics"], seed=0, method=run.bootstrap))
        rounds["bootstrap"].append(figures)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "rounds": rounds,
                "memory_mb": peak - before,
                "peak_mb": peak,
                "bootstrap": run.bootstrap,
                "score": report.data["score"],
                "grades": report.data["counts"]["grades"],
                "metrics": report.data["metrics"],
            }
        )
    )


if __name__ == "__main__":
    main()
