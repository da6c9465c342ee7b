"""Meta-evaluation at the paper's size, from PostgreSQL, beside the reference's own agreement code.

Generates 60,896 physician labels over 34 categories (~30,000 items, 250 physicians) and a
grader's labels, loads them with import_meta_eval and import_grader_labels into a fresh
PostgreSQL database, then times:

* the whole report from the database (`meta_eval` service: selector, agreement, 1000-resample
  bootstrap intervals, ranks, disagreements, JSON) -- target <= 3 s;
* the agreement figures alone (grader and physicians) against the reference implementation
  on the same labels -- target >= 10x faster;
* Cohen's kappa and Krippendorff's alpha (overall and per category, with 1000-resample
  intervals) against scikit-learn's cohen_kappa_score and the krippendorff package computing
  the point values only, when those are installed (they are test-only dependencies).

The reference is `healthbench_meta_eval.py` of openai/simple-evals, loaded at run time from
--reference-dir (default: env SIMPLE_EVALS_DIR; a work tree or a bare git directory). Nothing
of it is copied here. When its dependencies (blobfile, jinja2, ...) are installed the module is
imported whole; otherwise only its agreement functions are taken from its source. Without it,
a plain-Python pair loop doing the same counting is the baseline, and the output says so.

Usage: .venv/bin/python bench/metaeval_bench.py [--reference-dir DIR] [--database NAME]
"""

import argparse
import ast
import importlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import types
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._db import fresh_postgres
from bench.generate import WORDS

N_LABELS, N_ITEMS, N_CATEGORIES, N_PHYSICIANS = 60_896, 30_000, 34, 250
REFERENCE_FILE = "healthbench_meta_eval.py"
REFERENCE_FUNCTIONS = (
    "compute_metrics_for_rater_by_class",
    "get_f1_metrics",
    "compute_f1_metric",
    "get_balanced_metrics",
    "compute_balanced_metric",
)
REFERENCE_CONSTANTS = ("INDEX_STR_TEMPLATE", "CLUSTER_STR_TEMPLATE")


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words)).capitalize() + "."


def generate(seed: int = 0) -> tuple[list[dict], list[bool]]:
    """Meta-eval rows and grader labels of the paper's size: our own random text, not public rows."""
    rng = random.Random(seed)
    categories = [f"cluster:hedging_bench-{i:02d}_criterion" for i in range(N_CATEGORIES)]
    physicians = [f"{rng.getrandbits(256):064x}" for _ in range(N_PHYSICIANS)]
    # Every item has two labels; the 896 left over give some items a third or fourth.
    extra = [0] * N_ITEMS
    for i in rng.sample(range(N_ITEMS), N_LABELS - 2 * N_ITEMS - 100) + rng.sample(range(N_ITEMS), 100):
        extra[i] += 1
    rows: list[dict] = []
    grader: list[bool] = []
    conversation = 0
    while len(rows) < N_ITEMS:
        conversation += 1
        prompt_id = f"bench-{conversation:05d}"
        prompt = [{"content": _text(rng, rng.randint(20, 120)), "role": "user"}]
        pool = rng.sample(physicians, 6)  # physicians label a conversation's responses together
        cats = rng.sample(categories, rng.randint(1, 3))
        for c in range(rng.randint(2, 4)):
            completion_id, completion = f"{prompt_id}-c{c}", _text(rng, rng.randint(60, 200))
            for category in cats:
                if len(rows) == N_ITEMS:
                    break
                truth = rng.random() < 0.6
                raters = rng.sample(pool, 2 + extra[len(rows)])
                labels = [truth if rng.random() < 0.8 else not truth for _ in raters]
                rows.append(
                    {
                        "anonymized_physician_ids": raters,
                        "binary_labels": labels,
                        "category": category,
                        "completion": completion,
                        "completion_id": completion_id,
                        "prompt": prompt,
                        "prompt_id": prompt_id,
                        "rubric": f"Bench criterion {category}.",
                        "canary": "bench:healthbench-studio",
                    }
                )
                grader.append(truth if rng.random() < 0.85 else not truth)
    assert sum(len(r["binary_labels"]) for r in rows) == N_LABELS
    return rows, grader


# --- The baseline ------------------------------------------------------------------------


def _reference_source(directory: Path) -> str:
    if (directory / REFERENCE_FILE).is_file():
        return (directory / REFERENCE_FILE).read_text()
    # A bare mirror has no work tree: read the file from its HEAD commit (read-only).
    done = subprocess.run(
        ["git", f"--git-dir={directory}", "show", f"HEAD:{REFERENCE_FILE}"], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise FileNotFoundError(f"{directory} holds no {REFERENCE_FILE}: {done.stderr.strip()}")
    return done.stdout


def load_reference(directory: Path) -> tuple[dict, str]:
    """The reference's agreement functions, and how they were loaded."""
    work_tree = (directory / REFERENCE_FILE).is_file()
    if work_tree:
        # The module imports its package siblings relatively: import it as part of a package.
        package = types.ModuleType("simple_evals_reference")
        package.__path__ = [str(directory)]
        sys.modules["simple_evals_reference"] = package
        try:
            module = importlib.import_module("simple_evals_reference.healthbench_meta_eval")
            return vars(module), f"reference module imported whole from {directory}"
        except ImportError as exc:
            why = f"{directory / REFERENCE_FILE} (the whole module needs {exc.name}, not installed)"
        finally:
            for name in [m for m in sys.modules if m.startswith("simple_evals_reference")]:
                del sys.modules[name]
    else:
        why = f"HEAD:{REFERENCE_FILE} of the git directory {directory}"
    # The agreement functions use only defaultdict and Literal: run just their definitions.
    tree = ast.parse(_reference_source(directory))
    keep: list[ast.stmt] = [
        node
        for node in tree.body
        if (isinstance(node, ast.FunctionDef) and node.name in REFERENCE_FUNCTIONS)
        or (isinstance(node, ast.Assign) and any(getattr(t, "id", None) in REFERENCE_CONSTANTS for t in node.targets))
    ]
    namespace: dict = {"defaultdict": defaultdict, "Literal": Literal}
    # The reference's own functions, from the checked-out simple-evals file, to time beside ours.
    code = compile(ast.Module(body=keep, type_ignores=[]), str(directory / REFERENCE_FILE), "exec")
    exec(code, namespace)  # noqa: S102
    lacking = sorted(set(REFERENCE_FUNCTIONS) - set(namespace))
    if lacking:
        raise ImportError(f"{REFERENCE_FILE} lacks {lacking}")
    return namespace, f"the reference's agreement functions, loaded from {why}"


def reference_agreement(ref: dict, rows: list[dict], grader: list[bool]) -> tuple[dict, dict]:
    """What HealthBenchMetaEval.__call__ computes after grading: grader, then each physician."""
    compute = ref["compute_metrics_for_rater_by_class"]
    model = compute(grader, [r["binary_labels"] for r in rows], [r["category"] for r in rows], "model")
    per_physician: dict = defaultdict(lambda: ([], [], []))
    for row in rows:
        labels = row["binary_labels"]
        for i, pid in enumerate(row["anonymized_physician_ids"]):
            per_physician[pid][0].append(labels[i])
            per_physician[pid][1].append(labels[:i] + labels[i + 1 :])
            per_physician[pid][2].append(row["category"])
    physicians: dict = defaultdict(dict)
    for pid, (own, others, clusters) in per_physician.items():
        for name, metric in compute(own, others, clusters, "physician").items():
            physicians[name][pid] = metric
    return model, physicians


def pair_loop_agreement(rows: list[dict], grader: list[bool]) -> tuple[dict, dict]:
    """Fallback baseline: the same pair counting in plain Python, one pair at a time."""

    def rate(selves, others, clusters, who):
        hits: dict = defaultdict(list)
        for own, peers, cluster in zip(selves, others, clusters, strict=True):
            for other in peers:
                for name in (f"precision_{'pos' if own else 'neg'}", f"recall_{'pos' if other else 'neg'}"):
                    hits[f"pairwise_{who}_{name}"].append(own == other)
                    hits[f"{cluster}: pairwise_{who}_{name}"].append(own == other)
        out = {k: {"n": len(v), "value": sum(v) / len(v)} for k, v in hits.items()}
        for key in [k for k in out if "precision" in k]:
            p, r = out[key], out.get(key.replace("precision", "recall"))
            if r is not None:
                f1 = 0.0 if p["value"] == r["value"] == 0 else 2 * p["value"] * r["value"] / (p["value"] + r["value"])
                out[key.replace("precision", "f1")] = {"n": p["n"] + r["n"] - p["value"] * p["n"], "value": f1}
        for key in [k for k in out if k.endswith("_pos")]:
            neg = out.get(key[:-3] + "neg")
            if neg is not None:
                out[key[:-3] + "balanced"] = {
                    "n": out[key]["n"] + neg["n"],
                    "value": (out[key]["value"] + neg["value"]) / 2,
                }
        return out

    model = rate(grader, [r["binary_labels"] for r in rows], [r["category"] for r in rows], "model")
    physicians: dict = defaultdict(dict)
    lists: dict = defaultdict(lambda: ([], [], []))
    for row in rows:
        labels = row["binary_labels"]
        for i, pid in enumerate(row["anonymized_physician_ids"]):
            for target, value in zip(
                lists[pid], (labels[i], labels[:i] + labels[i + 1 :], row["category"]), strict=True
            ):
                target.append(value)
    for pid, (own, others, clusters) in lists.items():
        for name, metric in rate(own, others, clusters, "physician").items():
            physicians[name][pid] = metric
    return model, physicians


def _same(ours: dict, theirs: dict) -> bool:
    """Equal to 1e-9, ours leaving out the undefined values the reference stores as None."""
    defined = {k: v for k, v in theirs.items() if v["value"] is not None}
    return set(ours) == set(defined) and all(
        ours[k]["n"] == defined[k]["n"] and abs(ours[k]["value"] - defined[k]["value"]) <= 1e-9 for k in ours
    )


def chance_baseline(rows: list[dict], grader: list[bool]) -> dict[str, float | None] | None:
    """Kappa and alpha per category and overall by scikit-learn and krippendorff, or None without them."""
    try:
        import numpy as np
        from krippendorff import alpha as kripp_alpha
        from sklearn.metrics import cohen_kappa_score
    except ImportError:
        return None
    out: dict[str, float | None] = {}
    for category in [None, *sorted({r["category"] for r in rows})]:
        chosen = [(r, g) for r, g in zip(rows, grader, strict=True) if category is None or r["category"] == category]
        said = [g for r, g in chosen for _ in r["binary_labels"]]
        truth = [label for r, _ in chosen for label in r["binary_labels"]]
        prefix = "" if category is None else f"{category}: "
        out[f"{prefix}cohen_kappa"] = float(cohen_kappa_score(said, truth))
        coders = sorted({p for r, _ in chosen for p in r["anonymized_physician_ids"]})
        column = {p: i for i, p in enumerate(coders)}
        data = np.full((len(coders), len(chosen)), np.nan)
        for j, (r, _) in enumerate(chosen):
            for p, label in zip(r["anonymized_physician_ids"], r["binary_labels"], strict=True):
                data[column[p], j] = float(label)
        out[f"{prefix}krippendorff_alpha"] = float(kripp_alpha(reliability_data=data, level_of_measurement="nominal"))
    return out


T = TypeVar("T")


def _close(a: float | None, b: float | None) -> bool:
    """Equal within 1e-9, or both undefined."""
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-9)


def best_of(n: int, fn: Callable[[], T]) -> tuple[float, T]:
    best = float("inf")
    for _ in range(max(1, n)):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-dir", type=Path, default=os.environ.get("SIMPLE_EVALS_DIR") or None)
    parser.add_argument("--database", default="healthbench_bench_metaeval")
    args = parser.parse_args()

    rows, grader = generate()
    n_items, n_physicians = len(rows), len({p for r in rows for p in r["anonymized_physician_ids"]})
    print(f"labels: {N_LABELS} over {N_CATEGORIES} categories, {n_items} items, {n_physicians} physicians")

    fresh_postgres(args.database)
    from grading.metaeval import agreement as metaeval
    from grading.metaeval.grader_labels import grader_labels_import
    from grading.metaeval.importer import meta_eval_import
    from grading.metaeval.report import report_json, run_meta_eval_analysis, run_meta_eval_report

    with tempfile.TemporaryDirectory() as tmp:
        meta, labels = Path(tmp) / "meta.jsonl", Path(tmp) / "grader.jsonl"
        meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
        labels.write_text(
            "".join(
                json.dumps(
                    {
                        "prompt_id": r["prompt_id"],
                        "completion_id": r["completion_id"],
                        "category": r["category"],
                        "criteria_met": g,
                        "explanation": "bench",
                    }
                )
                + "\n"
                for r, g in zip(rows, grader, strict=True)
            )
        )
        start = time.perf_counter()
        with meta.open("rb") as f:
            summary = meta_eval_import(lines=f)
        import_seconds = time.perf_counter() - start
        start = time.perf_counter()
        with labels.open("rb") as f:
            run = grader_labels_import(lines=f, run_name="bench-grader").run
        grader_seconds = time.perf_counter() - start
    print(f"load: import_meta_eval {import_seconds:.1f} s ({summary}); import_grader_labels {grader_seconds:.1f} s")

    cold = time.perf_counter()
    document = run_meta_eval_report(run=run, seed=0)
    text = report_json(document)
    cold = time.perf_counter() - cold
    report_seconds, _ = best_of(3, lambda: report_json(run_meta_eval_report(run=run, seed=0)))
    analysis = run_meta_eval_analysis(run=run, seed=0)
    from grading.metaeval.selectors import run_labels

    select_seconds, data = best_of(3, lambda: run_labels(run=run))
    assert data.n_items == n_items
    assert data.labels.item.size == N_LABELS
    print(
        f"report JSON: {len(text) / 1e6:.1f} MB, {len(document['disagreements'])} disagreements, "
        f"{len(analysis.result['intervals'])} intervals"
    )

    arrays = metaeval.labels_from_rows(rows)
    ours_seconds, (model, physicians) = best_of(
        5, lambda: (metaeval.grader_agreement(arrays, grader), metaeval.physician_agreement(arrays))
    )
    from_rows_seconds, _ = best_of(3, lambda: metaeval.labels_from_rows(rows))

    baseline = "plain-Python pair loop (no reference: pass --reference-dir or set SIMPLE_EVALS_DIR)"
    compute: Callable[[list[dict], list[bool]], tuple[dict, dict]] = pair_loop_agreement
    if args.reference_dir:
        try:
            ref, how = load_reference(args.reference_dir)
            baseline, compute = how, lambda r, g: reference_agreement(ref, r, g)
        except (OSError, ImportError, SyntaxError) as exc:
            baseline = f"plain-Python pair loop ({args.reference_dir}: {exc})"
    base_seconds, (ref_model, ref_physicians) = best_of(2, lambda: compute(rows, grader))
    same = (
        _same(model, ref_model)
        and set(physicians) == {k for k, v in ref_physicians.items() if any(m["value"] is not None for m in v.values())}
        and all(_same(physicians[k], ref_physicians[k]) for k in physicians)
    )

    print(f"baseline: {baseline}")
    print(f"same figures as the baseline (1e-9): {'yes' if same else 'NO'}")
    print(f"full report from PostgreSQL, cold          {cold:7.3f} s")
    print(f"full report from PostgreSQL (best of 3)    {report_seconds:7.3f} s   target <= 3 s")
    print(f"  of which reading the labels (selector)   {select_seconds:7.3f} s")
    print(f"agreement, grader + physicians: baseline   {base_seconds:7.3f} s")
    ratio = base_seconds / ours_seconds
    print(
        f"agreement, grader + physicians: ours       {ours_seconds:7.3f} s   ratio {ratio:6.1f}x faster (target >= 10x)"
    )
    print(
        f"  ours including labels_from_rows          {ours_seconds + from_rows_seconds:7.3f} s   ratio "
        f"{base_seconds / (ours_seconds + from_rows_seconds):6.1f}x faster"
    )
    from grading.metaeval.chance import grader_kappa, physician_alpha

    chance_seconds, (kappa, alpha) = best_of(
        3, lambda: (grader_kappa(arrays, grader, seed=0), physician_alpha(arrays, seed=0))
    )
    print(f"kappa + alpha with 1000-resample intervals: ours {chance_seconds:7.3f} s")
    base_chance_seconds, expected = best_of(1, lambda: chance_baseline(rows, grader))
    if expected is None:
        print("kappa + alpha baseline: scikit-learn / krippendorff not installed, no ratio")
    else:
        got = {**{k: v["value"] for k, v in kappa.items()}, **{k: v["value"] for k, v in alpha.items()}}
        agree = set(got) == set(expected) and all(_close(got[k], expected[k]) for k in expected)
        print(
            f"kappa + alpha baseline: sklearn cohen_kappa_score + krippendorff.alpha, point values only "
            f"{base_chance_seconds:7.3f} s   ratio {base_chance_seconds / chance_seconds:6.1f}x; "
            f"same values (1e-9): {'yes' if agree else 'NO'}"
        )
        same = same and agree
    ok = report_seconds <= 3 and base_seconds >= 10 * ours_seconds and same
    print("targets met" if ok else "TARGET MISSED")


if __name__ == "__main__":
    main()
