"""A paper-size run report from PostgreSQL, beside today's code and the reference's aggregation.

The run: 5,000 conversations x 16 samples, median 11 criteria (984,528 grades), written straight
into a fresh database with insert_rows (not timed), and the same at 2x and 4x (--scales).
Timed: grading.reports.report.run_report, the function the run_report command, the report page
and the downloads call, end to end from the database, with the bootstrap a new run draws with;
in a fresh process per side (bench/_report_child.py): this checkout and --baseline-ref (main
before this work by default, checked out by the bench into a temporary directory), on the same
database. Printed per side: CPU (the process and its PostgreSQL backend), wall time, load average,
the CPU of loading, scoring and the bootstrap, and the memory the report added to the process.

At 1x, also simple-evals' ``_aggregate_get_clipped_mean`` on the same per-example metrics,
loaded from the reference's source at run time (--reference-dir, default $SIMPLE_EVALS_DIR: a
checkout, or the bare git mirror), else a plain Python loop that does what it does; its CPU
beside ours, with identical means. Target (issue 32, item 3): the reference's CPU at least 100x
ours.

Usage: .venv/bin/python bench/scoring_bench.py [--conversations 5000] [--samples 16] [--scales 1,2,4]
       [--rounds 3] [--reuse] [--baseline-ref REF] [--reference-dir DIR] [--database NAME]
"""

import argparse
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._db import DEFAULT_ADMIN_URL, fresh_postgres
from bench.generate import WORDS, healthbench_lines

REFERENCE_FILES = ("healthbench_eval.py", "types.py")
REPO = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).resolve().parent / "_report_child.py"
BASELINE_REF = "2806953"  # main before issue 32's report work
TARGET = 100  # the reference's CPU over ours (issue 32, item 3)
FAILED_SHARE = 0.0005  # grades that failed: their responses are left out, as in a real run


# --- the baseline -----------------------------------------------------------------------------


def _reference_sources(directory: Path) -> Path | None:
    """A directory holding the reference's files: `directory` itself, or a copy out of its git history."""
    if (directory / "healthbench_eval.py").exists():
        return directory
    copy = Path(tempfile.mkdtemp(prefix="simple-evals-"))
    for name in REFERENCE_FILES:
        shown = subprocess.run(["git", "-C", str(directory), "show", f"HEAD:{name}"], capture_output=True)
        if shown.returncode != 0:
            return None
        (copy / name).write_bytes(shown.stdout)
    return copy


def load_reference(directory: str | None):
    """(_aggregate_get_clipped_mean, SingleEvalResult) from the reference's source, or None.

    Its module imports the OpenAI sampler, blobfile, pandas and the report templates at the
    top; the aggregation needs none of them, so those modules are stubbed when absent."""
    if not directory:
        return None
    sources = _reference_sources(Path(directory))
    if sources is None:
        return None
    package = "simple_evals_reference"
    root = types.ModuleType(package)
    root.__path__ = [str(sources)]
    sys.modules[package] = root
    stubs: dict[str, dict[str, object]] = {
        # Only its HTML template is read at import time (to build the report page's template).
        f"{package}.common": {"HTML_JINJA": ""},
        f"{package}.sampler": {"__path__": []},
        f"{package}.sampler.chat_completion_sampler": {
            "OPENAI_SYSTEM_MESSAGE_API": "",
            "ChatCompletionSampler": object,
        },
    }
    for name in ("blobfile", "pandas"):
        if importlib.util.find_spec(name) is None:
            stubs[name] = {}
    for name, attributes in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        sys.modules[name] = module
    spec = importlib.util.spec_from_file_location(f"{package}.healthbench_eval", sources / "healthbench_eval.py")
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # any import problem: fall back to the plain loop
        print(f"reference not importable from {directory}: {exc!r}")
        return None
    # The package made above from the reference's checkout; it exists only at run time.
    from simple_evals_reference.types import SingleEvalResult  # type: ignore[import-not-found]

    return module._aggregate_get_clipped_mean, SingleEvalResult


def plain_aggregate(per_example: list[dict[str, float]]) -> dict[str, float]:
    """What the reference's aggregation does, as a plain Python loop: per metric, the mean
    clipped to [0, 1], the count, and the std of 1000 clipped means of resamples."""
    columns: dict[str, list[float]] = defaultdict(list)
    for metrics in per_example:
        for name, value in metrics.items():
            columns[name].append(value)
        columns["score"].append(metrics["overall_score"])
    rng = random.Random(0)
    out: dict[str, float] = {}
    for name, values in columns.items():
        n = len(values)
        out[name] = min(1.0, max(0.0, sum(values) / n))
        out[f"{name}:n_samples"] = n
        means = [min(1.0, max(0.0, sum(rng.choices(values, k=n)) / n)) for _ in range(1000)]
        out[f"{name}:bootstrap_std"] = statistics.pstdev(means)
    return out


# --- the data ---------------------------------------------------------------------------------


def load_run(n_conversations: int, samples: int, seed: int = 0):
    """Import a synthetic dataset, then write one imported run's responses and grades with insert_rows."""
    from django.db import transaction

    from annotation.formats.importer import import_healthbench_lines
    from annotation.models import Criterion
    from grading.models import Grade, Response, Run
    from healthbench_web.bulk import db_json, db_now, insert_rows, new_codes

    import_healthbench_lines((line.encode() for line in healthbench_lines(n_conversations, seed)), subset_name="bench")
    rubric: dict[int, list[tuple]] = defaultdict(list)
    for row in Criterion.objects.order_by("conversation_id", "position").values_list(
        "conversation_id", "id", "position", "text", "points", "tags"
    ):
        rubric[row[0]].append(row[1:])
    tags_json: dict[tuple, str] = {}
    rng = np.random.default_rng(seed)
    words = " ".join(WORDS * 400)
    now = db_now()
    with transaction.atomic():
        run = Run.objects.create(plan=Run.Plan.STORED, name="bench", status=Run.Status.IMPORTED, samples=samples)
        owners = [c for c in sorted(rubric) for _ in range(samples)]
        lengths = rng.integers(200, 4000, size=len(owners)).tolist()
        codes = new_codes(len(owners))
        response_rows = [
            (codes[k], c, words[: lengths[k]], "imported", "bench-model", "{}", k % samples, "", None, None, None, now)
            for k, c in enumerate(owners)
        ]
        response_ids = insert_rows(Response, Response.INSERT_COLUMNS, response_rows)
        # A response's quality drives how many criteria it meets, so scores spread like a real run's.
        quality = rng.beta(4, 3, size=len(owners)).tolist()
        grades = []
        for response_id, conversation, q in zip(response_ids, owners, quality, strict=True):
            items = rubric[conversation]
            draws = rng.random(len(items)).tolist()
            failed = (rng.random(len(items)) < FAILED_SHARE).tolist()
            for (criterion_id, position, text, points, tags), draw, fail in zip(items, draws, failed, strict=True):
                met = None if fail else (draw < q if points > 0 else draw < (1 - q) * 0.4)
                tags_text = tags_json.setdefault(tuple(tags), db_json(tags))
                status = "failed" if fail else "graded"
                grades.append(
                    (
                        run.id,
                        response_id,
                        criterion_id,
                        position,
                        text,
                        points,
                        tags_text,
                        status,
                        met,
                        "Bench grade.",
                        "",
                        "",
                        1,
                        None,
                        None,
                        False,
                        now,
                    )
                )
        insert_rows(Grade, Grade.INSERT_COLUMNS, grades)
    return run, len(grades)


# --- the comparison ---------------------------------------------------------------------------


def per_example_metrics(run):
    """The per-example metric dicts the reference aggregates, from our own per-response scores."""
    from grading.reports import scoring
    from grading.reports.selectors import run_grades_get

    scores = scoring.score_grades(**run_grades_get(run=run).score_arrays())
    names = list(scores["metrics"])
    matrix = np.vstack([scores["metrics"][name] for name in names])
    out = []
    for r in np.flatnonzero(scores["scored"]):
        column = matrix[:, r]
        out.append({name: float(v) for name, v in zip(names, column.tolist(), strict=True) if v == v})
    return out


def _run_exists(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url) as conn:
            return conn.execute("SELECT count(*) FROM grading_run WHERE name = 'bench'").fetchone() == (1,)
    except psycopg.Error:
        return False


def _database(args, scale: int) -> str:
    """The scale's database, built by a fresh process unless --reuse finds it built; migrated."""
    name = args.database if scale == 1 else f"{args.database}_x{scale}"
    url = f"{os.environ.get('BENCH_ADMIN_DATABASE_URL', DEFAULT_ADMIN_URL).rsplit('/', 1)[0]}/{name}"
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "healthbench_web.settings"}
    if args.reuse and _run_exists(url):
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    else:
        command = [sys.executable, __file__, "--build-only", "--database", name]
        command += ["--conversations", str(args.conversations * scale), "--samples", str(args.samples)]
        subprocess.run(command, cwd=REPO, env=env, check=True)
    return url


def _build(args) -> None:
    fresh_postgres(args.database)
    start = time.perf_counter()
    _, n_grades = load_run(args.conversations, args.samples)
    from django.db import connection

    with connection.cursor() as cursor:
        # What autovacuum does soon after a bulk load: planner statistics and the visibility map.
        cursor.execute("VACUUM ANALYZE")
    print(f"built {args.database}: {n_grades} grades in {time.perf_counter() - start:.0f} s (not timed)")


def _measure(tree: Path, url: str, rounds: int) -> dict:
    """The report timed by bench/_report_child.py with the code of `tree` (see there)."""
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(tree), "LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, str(CHILD), str(rounds)], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"timing the report in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(figures: list[dict], key: str) -> float:
    return statistics.median(f[key] for f in figures)


def _cpu(figures: list[dict]) -> float:
    return statistics.median(f["process"] + f["database"] for f in figures)


def _line(side: str, measured: dict) -> str:
    rounds = measured["rounds"]
    total = rounds["total"]
    parts = ", ".join(f"{part} {_cpu(rounds[part]):.2f}" for part in ("loading", "scoring", "bootstrap"))
    return (
        f"  {side:9} CPU {_cpu(total):5.2f} s (process {_median(total, 'process'):.2f} + PostgreSQL "
        f"{_median(total, 'database'):.2f}), wall {_median(total, 'wall'):5.2f} s, load {_median(total, 'load'):4.1f}; "
        f"CPU of its parts: {parts} s; memory +{measured['memory_mb']:.0f} MB ({measured['bootstrap']} bootstrap)"
    )


def _baseline_tree(ref: str) -> Path:
    tree = Path(tempfile.mkdtemp(prefix="scoring-bench-baseline-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _reference_figures(args, url: str, ours: dict) -> None:
    """The reference's aggregation on the same per-example metrics, in this process (1x only)."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")
    import django

    django.setup()
    from grading.models import Run

    per_example = per_example_metrics(Run.objects.get(name="bench"))
    loaded = load_reference(args.reference_dir)
    np.random.seed(0)
    wall, cpu = time.perf_counter(), time.process_time()
    if loaded is not None:
        aggregate, SingleEvalResult = loaded
        results = [SingleEvalResult(score=m["overall_score"], metrics=m) for m in per_example]
        wall, cpu = time.perf_counter(), time.process_time()
        result = aggregate(results)
        reference = {**result.metrics, "score": result.score}
        baseline = f"simple-evals _aggregate_get_clipped_mean ({args.reference_dir})"
    else:
        reference = plain_aggregate(per_example)
        baseline = "plain Python loop doing what _aggregate_get_clipped_mean does (reference not importable)"
    cpu, wall, load = time.process_time() - cpu, time.perf_counter() - wall, os.getloadavg()[0]

    ours_metrics = {**ours["metrics"], "score": ours["score"]}
    assert ours_metrics.keys() == reference.keys(), sorted(ours_metrics.keys() ^ reference.keys())
    means = [k for k in reference if not k.endswith((":n_samples", ":bootstrap_std"))]
    assert all(ours_metrics[f"{k}:n_samples"] == reference[f"{k}:n_samples"] for k in means if k != "score")
    largest = max(abs(float(ours_metrics[k]) - float(reference[k])) for k in means)
    stds = [k for k in means if reference[f"{k}:n_samples"] >= 100 and reference[f"{k}:bootstrap_std"] > 1e-3]
    std_ratio = max(abs(ours_metrics[f"{k}:bootstrap_std"] / reference[f"{k}:bootstrap_std"] - 1) for k in stds)
    ours_cpu = _cpu(ours["rounds"]["total"])
    print(f"  reference {baseline}")
    print(
        f"            on the same {len(per_example)} per-example metric dicts: "
        f"CPU {cpu:.1f} s, wall {wall:.1f} s, load {load:.1f}"
    )
    print(f"  ratio     the reference's CPU / ours (process + PostgreSQL): {cpu / ours_cpu:.1f}x (target >= {TARGET}x)")
    print(f"  means     {len(means)} compared, largest difference {largest:.3g} (n_samples all equal)")
    print(f"  stds      largest relative difference of bootstrap stds (n >= 100) {std_ratio:.1%} (other resamples)")
    print("  target met" if cpu >= TARGET * ours_cpu and largest <= 1e-12 else "  TARGET MISSED")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--database", default="healthbench_bench_scoring")
    parser.add_argument("--reference-dir", default=os.environ.get("SIMPLE_EVALS_DIR"))
    parser.add_argument("--rounds", type=int, default=3, help="time the report this many times per side, median")
    parser.add_argument("--scales", default="1,2,4", help="multiples of --conversations to time, e.g. 1,2")
    parser.add_argument("--baseline-ref", default=BASELINE_REF, help="the code the report is timed beside")
    parser.add_argument("--reuse", action="store_true", help="reuse each scale's database when it holds the run")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_only:
        _build(args)
        return

    tree = _baseline_tree(args.baseline_ref)
    try:
        for scale in (int(s) for s in args.scales.split(",")):
            url = _database(args, scale)
            base = _measure(tree, url, args.rounds)
            ours = _measure(REPO, url, args.rounds)
            print(
                f"{scale}x: {args.conversations * scale} conversations x {args.samples} samples ({ours['grades']:,} "
                f"grades), the report from PostgreSQL, median of {args.rounds} per side"
            )
            print(_line("baseline", base) + f" [{args.baseline_ref}]")
            print(_line("ours", ours))
            print(
                f"  ratio     CPU {_cpu(base['rounds']['total']) / _cpu(ours['rounds']['total']):.2f}x less than "
                f"the baseline's; memory {ours['memory_mb'] / max(base['memory_mb'], 1):.2f}x"
            )
            if scale == 1:
                _reference_figures(args, url, ours)
    finally:
        shutil.rmtree(tree, ignore_errors=True)


if __name__ == "__main__":
    main()
