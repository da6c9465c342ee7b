"""A paper-size run report from PostgreSQL, beside the reference's own aggregation.

The run: 5,000 conversations x 16 samples, median 11 criteria (~880,000 grades), written
straight into a fresh database with insert_rows (not timed). Timed: grading.reports.report.run_report,
the function the run_report command, the report page and the downloads call, end to end from
the database. Baseline: simple-evals' ``_aggregate_get_clipped_mean`` on the same per-example
metrics, loaded from the reference's source at run time (--reference-dir, default
$SIMPLE_EVALS_DIR: a checkout, or the bare git mirror), else a plain Python loop that does
what it does. Target (issue 3): the whole report at least 10x faster, with identical means.

Usage: .venv/bin/python bench/scoring_bench.py [--conversations 5000] [--samples 16] [--reference-dir DIR]
"""

import argparse
import importlib.util
import os
import random
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

from bench._db import fresh_postgres
from bench.generate import WORDS, healthbench_lines

REFERENCE_FILES = ("healthbench_eval.py", "types.py")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--database", default="healthbench_bench_scoring")
    parser.add_argument("--reference-dir", default=os.environ.get("SIMPLE_EVALS_DIR"))
    parser.add_argument("--repeat", type=int, default=3, help="time run_report this many times, report the best")
    args = parser.parse_args()

    fresh_postgres(args.database)
    from grading.reports.report import run_report, run_report_cached
    from grading.reports.selectors import run_grades_get

    start = time.perf_counter()
    run, n_grades = load_run(args.conversations, args.samples)
    from django.db import connection

    with connection.cursor() as cursor:
        # What autovacuum does soon after a bulk load: planner statistics and the visibility map.
        cursor.execute("VACUUM ANALYZE")
    print(
        f"run: {args.conversations} conversations x {args.samples} samples = "
        f"{args.conversations * args.samples} responses, "
        f"{n_grades} grades (loaded in {time.perf_counter() - start:.1f} s, not timed)"
    )

    timings = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        report = run_report(run=run, seed=0)
        timings.append(time.perf_counter() - start)
    ours = min(timings)
    start = time.perf_counter()
    run_grades_get(run=run)
    load_seconds = time.perf_counter() - start
    run_report_cached(run=run)
    start = time.perf_counter()
    run_report_cached(run=run)
    cached_seconds = time.perf_counter() - start
    data = report.data
    print(f"report: score {data['score']:.4f}, {len(data['metrics']) // 3} metrics, counts {data['counts']}")

    per_example = per_example_metrics(run)
    loaded = load_reference(args.reference_dir)
    np.random.seed(0)
    start = time.perf_counter()
    if loaded is not None:
        aggregate, SingleEvalResult = loaded
        results = [SingleEvalResult(score=m["overall_score"], metrics=m) for m in per_example]
        start = time.perf_counter()
        result = aggregate(results)
        baseline_seconds = time.perf_counter() - start
        reference = {**result.metrics, "score": result.score}
        baseline = f"simple-evals _aggregate_get_clipped_mean ({args.reference_dir})"
    else:
        reference = plain_aggregate(per_example)
        baseline_seconds = time.perf_counter() - start
        baseline = "plain Python loop doing what _aggregate_get_clipped_mean does (reference not importable)"

    ours_metrics = {**data["metrics"], "score": data["score"]}
    assert ours_metrics.keys() == reference.keys(), sorted(ours_metrics.keys() ^ reference.keys())
    means = [k for k in reference if not k.endswith((":n_samples", ":bootstrap_std"))]
    assert all(ours_metrics[f"{k}:n_samples"] == reference[f"{k}:n_samples"] for k in means if k != "score")
    largest = max(abs(float(ours_metrics[k]) - float(reference[k])) for k in means)
    stds = [k for k in means if reference[f"{k}:n_samples"] >= 100 and reference[f"{k}:bootstrap_std"] > 1e-3]
    std_ratio = max(abs(ours_metrics[f"{k}:bootstrap_std"] / reference[f"{k}:bootstrap_std"] - 1) for k in stds)

    print(f"baseline  {baseline}")
    print(f"          on the same {len(per_example)} per-example metric dicts      {baseline_seconds:8.2f} s")
    print(
        f"ours      run_report from PostgreSQL, end to end (best of {args.repeat}: "
        f"{', '.join(f'{t:.2f}' for t in timings)})  {ours:8.2f} s   of which loading {load_seconds:.2f} s"
    )
    print(f"ratio     {baseline_seconds / ours:.1f}x faster (target >= 10x)")
    print(f"page      report from the cache (fingerprint query + cache get) {cached_seconds * 1000:.0f} ms")
    print(f"means     {len(means)} compared, largest difference {largest:.3g} (n_samples all equal)")
    print(f"stds      largest relative difference of bootstrap stds (n >= 100) {std_ratio:.1%} (independent resamples)")
    ok = baseline_seconds >= 10 * ours and largest <= 1e-12
    print("target met" if ok else "TARGET MISSED")


if __name__ == "__main__":
    main()
