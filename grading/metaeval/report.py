"""The meta-evaluation report of a run: one document for the command, the page and the downloads.

`run_meta_eval_report` reads the run's labels (grading.metaeval.selectors), computes everything with
grading.metaeval.agreement and returns a JSON-ready dict; `report_json` and `report_csv` write it out.
Both the `meta_eval` command and the download buttons call these, so they give the same bytes
for the same seed.
"""

import json
import statistics
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from django.core.paginator import Paginator

from grading.metaeval import agreement as metaeval
from grading.metaeval.chance import ALPHA, KAPPA, ChanceMetric, grader_kappa, physician_alpha
from grading.metaeval.charts import COLOURS, Lane, strip_chart
from grading.metaeval.selectors import ItemDetail, RunLabels, item_details, item_keys, labels_fingerprint, run_labels
from grading.models import Run, StoredReport
from grading.reports import stored
from grading.reports.grader_marks import grader_mark
from healthbench_web.shared_cache import once_per_version
from healthbench_web.spreadsheet import csv_text

N_RESAMPLES = 1000
CONFIDENCE = 0.95
DEFAULT_SEED = 0
PAGE_SIZE = 10
OVERALL = "overall"
MACRO_F1 = f"pairwise_model_{metaeval.MACRO_F1}"
# What report_document holds: its keys and those of its coverage and settings
# (grading.reports.stored's document_keys). The kept document's version is derived from this
# and META_EVAL_BUILDER, as the run report's is (tests/test_report_version.py).
META_EVAL_SCHEMA = (
    "cohen_kappa",
    "coverage",
    "coverage.cant_judge",
    "coverage.categories",
    "coverage.items",
    "coverage.items_without_grader_label",
    "coverage.labels",
    "coverage.labels_merged",
    "coverage.physicians",
    "disagreements",
    "grader",
    "intervals",
    "krippendorff_alpha",
    "model",
    "physicians",
    "ranks",
    "review",
    "run",
    "settings",
    "settings.confidence",
    "settings.n_resamples",
    "settings.seed",
    "ties",
)
# Raise it when a value is computed differently under the same keys.
META_EVAL_BUILDER = 2
META_EVAL_VERSION = stored.document_version("meta-eval", META_EVAL_BUILDER, META_EVAL_SCHEMA)

CSV_COLUMNS = (
    ("scope", "'overall' or the consensus criterion's cluster tag"),
    ("metric", "the reference's metric name without the scope prefix, e.g. pairwise_model_f1_balanced"),
    ("n", "pairs behind the value (see grading/metaeval/agreement.py)"),
    ("value", "the grader's value"),
    ("ci_low", "lower end of the bootstrap interval (macro F1 only)"),
    ("ci_high", "upper end of the bootstrap interval (macro F1 only)"),
    ("ci_n_defined", "bootstrap resamples in which the macro F1 was defined"),
    ("ci_n_resamples", "bootstrap resamples drawn"),
    ("rank", "1 + physicians strictly above the grader (macro F1 only)"),
    ("n_physicians", "physicians with a value in this scope"),
    ("n_higher", "physicians above the grader"),
    ("n_tied", "physicians tied with the grader"),
    ("n_lower", "physicians below the grader"),
    ("percentile", "share of physicians the grader beats, a tie counting half"),
    ("physician_median", "median of the physicians' values of the same metric"),
)
# Chance-corrected rows (metric cohen_kappa / krippendorff_alpha) use the same columns; n counts
# pairs for kappa and pairable physician labels for alpha. An undefined value is written as this.
UNDEFINED = "undefined"


@dataclass(frozen=True)
class Analysis:
    """A run's labels and everything grading.metaeval.agreement computed from them."""

    data: RunLabels
    result: dict[str, Any]
    seed: int


def run_meta_eval_analysis(*, run: Run, seed: int = DEFAULT_SEED) -> Analysis:
    data = run_labels(run=run)
    result = metaeval.meta_eval_report(
        data.labels, data.grader, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, seed=seed
    )
    # Streams of their own, so adding these left the macro F1 intervals of a seed unchanged.
    result["kappa"] = grader_kappa(
        data.labels, data.grader, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, seed=np.random.default_rng([seed, 1])
    )
    result["alpha"] = physician_alpha(
        data.labels, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, seed=np.random.default_rng([seed, 2])
    )
    return Analysis(data=data, result=result, seed=seed)


def run_meta_eval_analysis_cached(*, run: Run, seed: int = DEFAULT_SEED) -> Analysis:
    """run_meta_eval_analysis, computed once per progress step of the run and state of the
    physicians' labels, and shared by every process through the cache."""
    analysis = once_per_version(
        f"{META_EVAL_VERSION}:{run.code}:{seed}:{labels_fingerprint()}",
        run.report_version,
        lambda: run_meta_eval_analysis(run=run, seed=seed),
    )
    # The cached copy carries the run as it was then; show it as it is now.
    return replace(analysis, data=replace(analysis.data, run=run))


def run_meta_eval_report_cached(*, run: Run, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The meta-eval document (downloads, API, command), kept in the database for a finished
    run (grading.reports.stored) per seed and state of the physicians' labels."""
    key = f"{META_EVAL_VERSION}:{seed}:{labels_fingerprint()}"
    return once_per_version(
        f"meta-eval-document:v2:{run.code}:{key}",
        run.report_version,
        lambda: stored.stored(
            run,
            StoredReport.Kind.META_EVAL,
            key,
            lambda: report_document(run_meta_eval_analysis_cached(run=run, seed=seed)),
            stored.encode_json,
            stored.decode_json,
        ),
    )


def _items(analysis: Analysis, indices: list[int]) -> list[dict[str, Any]]:
    data = analysis.data
    keys = item_keys(response_ids=data.response_id[indices].tolist())
    yes = np.bincount(data.labels.item, weights=data.labels.label, minlength=data.n_items).astype(int)
    total = np.bincount(data.labels.item, minlength=data.n_items)
    category = np.zeros(data.n_items, dtype=np.intp)
    category[data.labels.item] = data.labels.category
    out = []
    for i in indices:
        prompt_id, completion_id = keys[int(data.response_id[i])]
        out.append(
            {
                "prompt_id": prompt_id,
                "completion_id": completion_id,
                "category": data.labels.category_names[category[i]],
                "grader": bool(data.grader[i] == 1.0),
                "n_met": int(yes[i]),
                "n_not_met": int(total[i] - yes[i]),
            }
        )
    return out


def report_document(analysis: Analysis) -> dict[str, Any]:
    """The JSON document: the reference's `model` and `physicians` figures, then our extras."""
    data, result = analysis.data, analysis.result
    flagged = result["disagreements"]
    return {
        "run": data.run.name,
        # The run's grader and grader prompt against the reference's, as in its score report
        # (grading.reports.grader_marks); None for grader labels imported from a file.
        "grader": grader_mark(data.run),
        "settings": {"seed": analysis.seed, "n_resamples": N_RESAMPLES, "confidence": CONFIDENCE},
        "coverage": {
            "items": data.n_items,
            "items_without_grader_label": data.n_missing,
            "labels": int(data.labels.item.size),
            "physicians": len(data.labels.physician_ids),
            "categories": len(data.labels.category_names),
            # Repeated listings of one physician on one item, stored as one label: the reference
            # counts each listing as a pair, so its pair counts exceed ours by these.
            "labels_merged": data.labels_merged,
            # Physicians' "can't judge" answers on these items: kept out of every figure above.
            "cant_judge": data.cant_judge,
        },
        "model": result["model"],
        "physicians": result["physician"],
        "intervals": result["intervals"],
        "ranks": result["rank"],
        # Chance-corrected agreement (grading/metaeval/chance.py): value None where undefined.
        "cohen_kappa": result["kappa"],
        "krippendorff_alpha": result["alpha"],
        # Items where the grader differs from the physicians' strict majority, strongest first.
        "disagreements": _items(analysis, flagged["item"]),
        # Items with a physician tie, which the grader labelled: worth a look, not counted above.
        "ties": _items(analysis, flagged["tied_item"]),
        # The review's two causes, with counts per consensus criterion: physicians who disagree
        # among themselves (the criterion may be ambiguous), and a grader against physicians who agree.
        "review": {
            name: {"counts": cause["counts"], "items": _items(analysis, cause["item"])}
            for name, cause in result["review"].items()
        },
    }


def run_meta_eval_report(*, run: Run, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The whole report of `run` from the database, as a JSON-ready dict."""
    return report_document(run_meta_eval_analysis(run=run, seed=seed))


def report_json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2) + "\n"


def _split(name: str) -> tuple[str, str]:
    # Category names are cluster tags, which hold no ": "; the metric name never does either.
    scope, _, metric = name.rpartition(": ")
    return scope or OVERALL, metric


def report_csv(document: dict[str, Any]) -> str:
    """One row per (scope, grader metric), with the interval and rank beside the macro F1."""
    rows: list[list[Any]] = []
    for name, metric in document["model"].items():
        scope, base = _split(name)
        interval = document["intervals"].get(name, {})
        rank = document["ranks"].get(name, {})
        peers = document["physicians"].get(name.replace("pairwise_model_", "pairwise_physician_"), {})
        median = statistics.median(m["value"] for m in peers.values()) if peers else None
        cells = [
            scope,
            base,
            metric["n"],
            metric["value"],
            interval.get("low"),
            interval.get("high"),
            interval.get("n_defined"),
            interval.get("n_resamples"),
            rank.get("rank"),
            rank.get("n_physicians"),
            rank.get("n_higher"),
            rank.get("n_tied"),
            rank.get("n_lower"),
            rank.get("percentile"),
            median,
        ]
        rows.append(["" if c is None else c for c in cells])
    for table in (document["cohen_kappa"], document["krippendorff_alpha"]):
        for name, chance in table.items():
            scope, base = _split(name)
            value = UNDEFINED if chance["value"] is None else chance["value"]
            cells = [
                scope,
                base,
                chance["n"],
                value,
                chance["low"],
                chance["high"],
                chance["n_defined"],
                chance["n_resamples"],
            ]
            rows.append(["" if c is None else c for c in cells] + [""] * (len(CSV_COLUMNS) - len(cells)))
    # The grader and its prompt, as the score report's CSV names them (value in the value column).
    grader = document.get("grader")
    if grader:
        for metric, value in (
            ("grader_request", grader["label"]),
            ("grader_prompt", grader["prompt_label"]),
            ("grader_prompt_sha256", grader["prompt_sha256"]),
        ):
            rows.append([OVERALL, metric, "", value] + [""] * (len(CSV_COLUMNS) - 4))
    # Review counts: metric items_physicians_split / items_grader_against_agreeing_physicians, value the count.
    for name, cause in document.get("review", {}).items():
        for scope, count in cause["counts"].items():
            rows.append([scope, f"items_{name}", "", count] + [""] * (len(CSV_COLUMNS) - 4))
    return csv_text([name for name, _ in CSV_COLUMNS], rows)


# --- The web pages -----------------------------------------------------------------------


def _scope_counts(data: RunLabels, indices: list[int] | np.ndarray) -> dict[str, int]:
    category = np.zeros(data.n_items, dtype=np.intp)
    category[data.labels.item] = data.labels.category
    counts = np.bincount(category[np.asarray(indices, dtype=np.intp)], minlength=len(data.labels.category_names))
    out = dict(zip(data.labels.category_names, counts.tolist(), strict=True))
    out[OVERALL] = len(indices)
    return out


def report_page(analyses: list[Analysis]) -> dict[str, Any]:
    """What the report page shows for one or more runs side by side: a summary and one row per scope."""
    runs: list[dict[str, Any]] = []
    for index, a in enumerate(analyses):
        runs.append(
            {
                "run": a.data.run,
                "grader": grader_mark(a.data.run),
                "colour": COLOURS[index % len(COLOURS)],
                "items": a.data.n_items,
                "missing": a.data.n_missing,
                "labels": int(a.data.labels.item.size),
                "physicians": len(a.data.labels.physician_ids),
                "labels_merged": a.data.labels_merged,
                "items_by_scope": _scope_counts(a.data, np.arange(a.data.n_items)),
                "flagged_by_scope": _scope_counts(a.data, a.result["disagreements"]["item"]),
            }
        )
    categories = sorted({name for a in analyses for name in a.data.labels.category_names})
    rows = []
    for scope in [OVERALL, *categories]:
        prefix = "" if scope == OVERALL else f"{scope}: "
        cells, lanes = [], []
        for a, summary in zip(analyses, runs, strict=True):
            model = a.result["model"].get(prefix + MACRO_F1)
            interval = a.result["intervals"].get(prefix + MACRO_F1, {})
            rank = a.result["rank"].get(prefix + MACRO_F1, {})
            peers = a.result["physician"].get(f"{prefix}pairwise_physician_{metaeval.MACRO_F1}", {})
            value = model["value"] if model else None
            kappa: ChanceMetric | dict = a.result["kappa"].get(prefix + KAPPA, {})
            alpha: ChanceMetric | dict = a.result["alpha"].get(prefix + ALPHA, {})
            cells.append(
                {
                    "run": summary["run"],
                    "colour": summary["colour"],
                    "items": summary["items_by_scope"].get(scope, 0),
                    "flagged": summary["flagged_by_scope"].get(scope, 0),
                    "value": value,
                    "low": interval.get("low"),
                    "high": interval.get("high"),
                    "rank": rank.get("rank"),
                    "n_physicians": len(peers),
                    "percentile": rank.get("percentile"),
                    "physician_median": statistics.median(m["value"] for m in peers.values()) if peers else None,
                    "kappa": kappa,
                    "alpha": alpha,
                }
            )
            lanes.append(
                Lane(
                    [m["value"] for m in peers.values()],
                    value,
                    interval.get("low"),
                    interval.get("high"),
                    summary["colour"],
                )
            )
        rows.append(
            {"scope": scope, "category": "" if scope == OVERALL else scope, "cells": cells, "chart": strip_chart(lanes)}
        )
    return {"runs": runs, "rows": rows, "seed": analyses[0].seed if analyses else DEFAULT_SEED}


@dataclass(frozen=True)
class ReviewItem:
    detail: ItemDetail
    grader: bool
    n_met: int
    n_not_met: int


# The review's views: the cause each one shows, and the words the page uses for it.
VIEWS = {
    "": (
        "Grader against the physicians' majority",
        "Items where the grader's label differs from the strict majority of physicians, widest margin first.",
    ),
    metaeval.GRADER_AGAINST_AGREEING: (
        "The grader is wrong",
        "Two or more physicians agree with each other and the grader says the opposite: most likely the grader's "
        "mistake. Largest groups of agreeing physicians first.",
    ),
    metaeval.PHYSICIANS_SPLIT: (
        "The criterion is ambiguous",
        "Physicians disagree among themselves (a 2–1 split as much as a tie), whatever the grader said: the "
        "criterion may be unclear. The criterion's Krippendorff's α (agreement among physicians beyond chance) "
        "is shown beside its count. Closest splits first.",
    ),
    "ties": (
        "Physician ties",
        "Items where the physicians split evenly, which the grader labelled: no majority to disagree with, "
        "but worth a look.",
    ),
}


def disagreement_page(*, run: Run, category: str = "", show: str = "", page_number: Any = None) -> dict[str, Any]:
    """One page of the items of one review view, with the counts of each cause per consensus criterion."""
    if show not in VIEWS:
        show = ""
    analysis = run_meta_eval_analysis_cached(run=run)
    data, result = analysis.data, analysis.result
    review = result["review"]
    if show in review:
        indices = np.asarray(review[show]["item"], dtype=np.intp)
    else:
        flagged = result["disagreements"]
        indices = np.asarray(flagged["tied_item" if show == "ties" else "item"], dtype=np.intp)
    item_category = np.zeros(data.n_items, dtype=np.intp)
    item_category[data.labels.item] = data.labels.category
    if category:
        code = data.labels.category_names.index(category) if category in data.labels.category_names else -1
        indices = indices[item_category[indices] == code]
    yes = np.bincount(data.labels.item, weights=data.labels.label, minlength=data.n_items).astype(int)
    total = np.bincount(data.labels.item, minlength=data.n_items)
    page = Paginator(indices.tolist(), PAGE_SIZE).get_page(page_number)
    shown = list(page.object_list)
    details = item_details(run=run, items=[(int(data.response_id[i]), int(data.criterion_id[i])) for i in shown])
    items = [
        ReviewItem(detail=d, grader=bool(data.grader[i] == 1.0), n_met=int(yes[i]), n_not_met=int(total[i] - yes[i]))
        for d, i in zip(details, shown, strict=True)
    ]
    split, against = review[metaeval.PHYSICIANS_SPLIT]["counts"], review[metaeval.GRADER_AGAINST_AGREEING]["counts"]
    items_by_scope = _scope_counts(data, np.arange(data.n_items))
    counts = [
        {
            "scope": scope,
            "items": items_by_scope.get(scope, 0),
            "split": split.get(scope, 0),
            "against": against.get(scope, 0),
            "alpha": result["alpha"].get(("" if scope == OVERALL else f"{scope}: ") + ALPHA, {}).get("value"),
        }
        for scope in [OVERALL, *data.labels.category_names]
    ]
    title, explanation = VIEWS[show]
    return {
        "page": page,
        "items": items,
        "categories": data.labels.category_names,
        "category": category,
        "show": show,
        "ties": show == "ties",
        "views": [(key, words[0]) for key, words in VIEWS.items()],
        "title": title,
        "explanation": explanation,
        "counts": counts,
    }
