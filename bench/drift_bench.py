"""A finished run's report page at paper size, with its drift notice ("criteria added or edited
since this run"), beside the baseline's page in the same bench run.

The run: --conversations x --samples (5,000 x 16, ~984k grades by default), written by
bench/scoring_bench.py's generator into a fresh PostgreSQL database, plus one conversation
outside the run. Its report is stored and its drift baseline recorded as the run's end does
(warm_report; that one-off cost is printed too). Then each side, in a fresh process (an empty
cache: what every process sees after a cache flush or a restart), requests the run's page three
times through Django's test client:

* after a cache flush;
* after a criterion edit elsewhere (on the conversation outside the run);
* after a criterion edit on one of the run's conversations.

Each request's wall time, CPU seconds (this process plus its PostgreSQL backend, which on a
machine shared with other work is the steadier figure), the process's peak memory and the load
average are printed. Target (issue 32): the first two <= 100 ms. Baseline: main's code (--baseline-ref),
checked out with git archive into a temporary directory and run on the same database after ours
(its code does not move the rubric versions, so ours goes first). --scales 1,2,4 repeats it all
at 2x and 4x the conversations (same samples), so that a step that grows faster than the data
would show.

Usage: .venv/bin/python bench/drift_bench.py [--conversations 5000] [--samples 16] [--scales 1]
       [--baseline-ref main] [--reuse]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import DEFAULT_ADMIN_URL  # noqa: E402

TARGET_MS = 100
OUTSIDE = "drift-bench-outside"

# Run in a fresh process of either side's tree: the run's page after a cache flush, after an edit
# elsewhere and after an edit on one of its conversations; JSON on stdout.
_SIDE = """
import json, os, re, sys, time
import django
django.setup()
from django.db import connection
from django.test import Client
from django.urls import reverse
from annotation.models import Conversation, Criterion, Physician
from annotation.services.rubric import criterion_update
from grading.models import Run

def backend_cpu():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

run = Run.objects.get(name="bench")
curator = Physician.objects.get(user__username="bench-curator")
client = Client()
client.force_login(curator.user)
# Untimed: imports, templates, the session, on another run's page.
assert client.get(reverse("report_detail", args=[Run.objects.get(name="warm").code])).status_code == 200
url = reverse("report_detail", args=[run.code])
out = {}

def timed(label):
    pg, cpu, start = backend_cpu(), time.process_time(), time.perf_counter()
    response = client.get(url)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu + backend_cpu() - pg
    assert response.status_code == 200, response.status_code
    notice = re.search(r'<div class="notice" id="rubric-drift"[^>]*>\\s*<p><b>([^<]*)</b>', response.content.decode())
    out[label] = {"wall_ms": wall * 1000, "cpu_s": cpu, "notice": notice.group(1) if notice else "",
                  "load": os.getloadavg()[0]}

def edit(conversation, suffix):
    criterion = Criterion.objects.filter(conversation=conversation).order_by("position").first()
    base = criterion.text.split(" (edit")[0]
    text, points, axis = f"{base} (edit {suffix})", (criterion.points + 1) or 1, criterion.axis or "accuracy"
    criterion_update(physician=curator, criterion=criterion, text=text, points=points, axis=axis)

timed("after a cache flush")
edit(Conversation.objects.get(prompt_id=sys.argv[1]), sys.argv[2])
timed("after an edit elsewhere")
edit(Conversation.objects.exclude(prompt_id=sys.argv[1]).order_by("id").first(), sys.argv[2])
timed("after an edit on one of its conversations")
# VmHWM: this program's peak (ru_maxrss would keep the forking parent's across exec).
out["peak_rss_mb"] = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024
json.dump(out, sys.stdout)
"""


def _tree(ref: str) -> Path:
    tree = Path(tempfile.mkdtemp(prefix="drift-bench-baseline-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _side(tree: Path, suffix: str) -> dict:
    env = dict(
        os.environ,
        PYTHONPATH=str(tree),
        LOG_LEVEL="WARNING",
        SECRET_KEY="bench-drift-" + "x" * 50,
        ALLOWED_HOSTS="testserver,127.0.0.1",
        SECURE_SSL_REDIRECT="0",
    )
    done = subprocess.run(
        [sys.executable, "-c", _SIDE, OUTSIDE, suffix], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"the page requests in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _exists(admin_url: str, database: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(f"{admin_url.rsplit('/', 1)[0]}/{database}", autocommit=True) as conn:
            return conn.execute("SELECT 1 FROM grading_run WHERE name = 'bench'").fetchone() is not None
    except psycopg.Error:
        return False  # no such database, or one a stopped bench left half built


def _data(args, conversations: int):
    """The finished run (built, or taken from the previous database with --reuse), one
    conversation outside it, a curator; its report stored and its drift baseline recorded."""
    admin_url = os.environ.get("BENCH_ADMIN_DATABASE_URL", DEFAULT_ADMIN_URL)
    database = f"{args.database}_{conversations}"
    if args.reuse and _exists(admin_url, database):
        os.environ["DATABASE_URL"] = f"{admin_url.rsplit('/', 1)[0]}/{database}"
        import django
        from django import db

        django.setup()
        db.connections.close_all()
        db.connections["default"].settings_dict["NAME"] = database
    else:
        from bench._db import fresh_postgres
        from bench.scoring_bench import load_run

        if "django" in sys.modules:
            from django import db

            db.connections.close_all()
            db.connections["default"].settings_dict["NAME"] = database
        fresh_postgres(database)
        start = time.perf_counter()
        load_run(conversations, args.samples)
        from django.contrib.auth.models import User
        from django.db import connection

        from annotation.models import Conversation, Criterion, Physician
        from grading.models import Run

        outside = Conversation.objects.create(prompt_id=OUTSIDE, messages=[{"role": "user", "content": "Hello?"}])
        greets = Criterion.objects.create(conversation=outside, position=0, text="Greets back.", points=2, tags=[])
        # A small run whose page warms each side's process (imports, templates), as a serving
        # process is warm when the cache is flushed under it.
        from grading.models import Grade, Response

        warm = Run.objects.create(plan=Run.Plan.STORED, name="warm", status=Run.Status.IMPORTED)
        response = Response.objects.create(conversation=outside, text="Hello.", sample_index=0)
        Grade.objects.create(
            run=warm, response=response, criterion=greets, position=0, criterion_text=greets.text, points=2, met=True
        )
        user = User.objects.create(username="bench-curator")
        Physician.objects.create(user=user, role=Physician.Role.CURATOR)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        print(f"data: loaded in {time.perf_counter() - start:.0f} s (not timed)")
    from grading.drift import rubric_drift_stored
    from grading.models import Grade, Run, RunRubric
    from grading.reports.report import run_report_stored

    run = Run.objects.get(name="bench")
    run_report_stored(run=run, seed=0)  # as the run's end does (warm_report)
    RunRubric.objects.filter(run=run).delete()
    Run.objects.filter(id=run.id).update(drift_baseline=None)
    run.refresh_from_db()
    cpu, start = time.process_time(), time.perf_counter()
    rubric_drift_stored(run)
    print(
        f"drift baseline recorded once at the run's end (warm_report): {time.perf_counter() - start:.2f} s wall, "
        f"{time.process_time() - cpu:.2f} s CPU in this process (not in the page)"
    )
    return Grade.objects.filter(run=run).count()


def _print(label: str, figures: dict) -> None:
    print(f"  {label} (peak memory {figures['peak_rss_mb']:.0f} MB):")
    for key in ("after a cache flush", "after an edit elsewhere", "after an edit on one of its conversations"):
        f = figures[key]
        notice = f["notice"] or "no notice"
        print(f"    {key}: {f['wall_ms']:.0f} ms wall, {f['cpu_s'] * 1000:.0f} ms CPU, load {f['load']:.1f} [{notice}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--scales", default="1", help="comma-separated multiples of --conversations")
    parser.add_argument("--database", default="healthbench_bench_drift")
    parser.add_argument("--baseline-ref", default="main")
    parser.add_argument("--reuse", action="store_true", help="reuse the databases of a previous run where they exist")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")
    os.environ.pop("REDIS_URL", None)  # each process its own cache: a fresh process is a flushed cache
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", args.baseline_ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    baseline = _tree(commit)
    try:
        for scale in (int(s) for s in args.scales.split(",")):
            conversations = args.conversations * scale
            n_grades = _data(args, conversations)
            print(
                f"run: {conversations} conversations x {args.samples} samples, {n_grades:,} grades (finished), "
                f"load {os.getloadavg()[0]:.1f}"
            )
            ours = _side(REPO, f"ours-{scale}")
            theirs = _side(baseline, f"baseline-{scale}")
            _print("ours", ours)
            _print(f"baseline ({args.baseline_ref} = {commit})", theirs)
            for key in ("after a cache flush", "after an edit elsewhere"):
                a, b = ours[key], theirs[key]
                met = "met" if a["wall_ms"] <= TARGET_MS else "NOT met"
                print(
                    f"  {key}: {b['wall_ms'] / a['wall_ms']:.0f}x on wall, {b['cpu_s'] / max(a['cpu_s'], 1e-3):.0f}x "
                    f"on CPU; target <= {TARGET_MS} ms {met}"
                )
    finally:
        shutil.rmtree(baseline, ignore_errors=True)


if __name__ == "__main__":
    main()
