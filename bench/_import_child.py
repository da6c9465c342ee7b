"""One import measured in its own process, for bench/import_bench.py.

Usage: python bench/_import_child.py CODE_DIR FILE DATABASE [--again]
CODE_DIR is the checkout whose code imports (this one or the baseline's). Prints one JSON line:
CPU seconds of the process and of its PostgreSQL backend, wall seconds, the memory the import
added (peak resident set during it minus the set before it, in MB), the load average, the
counts stored, and with --again the same figures for importing the file a second time.
"""

import json
import os
import sys
import time
from pathlib import Path


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(path: Path, backend: int) -> dict:
    from annotation.formats.importer import import_healthbench_lines
    from annotation.formats.validation import file_lines

    Path("/proc/self/clear_refs").write_text("5")  # the peak resident set starts again from here
    before = _rss_kb("VmRSS")
    load = os.getloadavg()[0]
    cpu, pg, wall = time.process_time(), _backend_cpu(backend), time.perf_counter()
    with path.open("rb") as f:
        import_healthbench_lines(file_lines(f), subset_name="bench")
    return {
        "cpu_process": time.process_time() - cpu,
        "cpu_postgres": _backend_cpu(backend) - pg,
        "wall": time.perf_counter() - wall,
        "memory_mb": (_rss_kb("VmHWM") - before) / 1024,
        "load": load,
    }


def main() -> None:
    code, path, database = Path(sys.argv[1]).resolve(), Path(sys.argv[2]), sys.argv[3]
    import psycopg

    admin_url = os.environ["BENCH_ADMIN_DATABASE_URL"]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{database}"')
    os.environ["DATABASE_URL"] = f"{admin_url.rsplit('/', 1)[0]}/{database}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "healthbench_web.settings"
    sys.path.insert(0, str(code))
    os.chdir(code)
    import django
    from django.core.management import call_command
    from django.db import connection

    django.setup()
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    figures = _measure(path, backend)
    if "--again" in sys.argv:
        figures["again"] = _measure(path, backend)
    from annotation.models import Conversation, Criterion

    figures["conversations"] = Conversation.objects.count()
    figures["criteria"] = Criterion.objects.count()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
