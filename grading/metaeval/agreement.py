"""Meta-evaluation: how well a grader agrees with physicians, in plain numpy.

The agreement figures follow ``healthbench_meta_eval.py`` in openai/simple-evals
(same names, values and counts); bootstrap intervals, the grader's rank among
physicians and the disagreement list are additions of ours. No Django here, so
the module can run in a worker, a management command or a notebook.

Input layout
------------
Physician labels are flat, equal-length arrays with one entry per label:

* ``item``      int  -- index of the rated (response, criterion) item, ``0 <= item < n_items``
* ``category``  int  -- code of the item's category, an index into ``category_names``;
  every label of an item carries the same code
* ``physician`` int  -- code of the physician, an index into ``physician_ids``
* ``label``     bool -- the physician's verdict (criterion met or not)

The grader gives at most one label per item: an array of length ``n_items`` holding
1.0/0.0 (or True/False), with NaN (or None in a list) where the grader gave no label.
Items without a grader label drop out of the grader's figures only.

Output
------
Agreement metrics map a name to ``{"n": int, "value": float}``. Names are
``pairwise_<rater>_<metric>_<class>`` with rater ``model`` or ``physician``, metric
``precision``/``recall``/``f1`` and class ``pos``/``neg``/``balanced``; per category the
name is prefixed ``"<category>: "``. A pair is one (rater label, other label) on the same
item. ``n`` counts pairs: for precision those where the rater said the class, for recall
those where the other said it, for F1 the union (TP + FP + FN), for balanced the sum of
the pos and neg ``n``. A metric whose value is undefined (no pairs to divide by) is left
out of the dict, which is how the reference represents it: its dicts never hold None.

The reference pairs its keys with ``str.replace("pos", "neg")``, so a category name
containing "pos" or "precision" would lose metrics there; none of the 34 HealthBench
categories does, and this module builds names directly instead of copying that quirk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

# Cell order of a 2x2 confusion row: index = 2 * rater_said_yes + other_said_yes.
TN, FN, FP, TP = 0, 1, 2, 3
METRICS = ("precision", "recall", "f1")
MACRO_F1 = "f1_balanced"

# One grader label per item: 1/0 or True/False, NaN or None where it gave none.
GraderLabels = np.ndarray | Sequence[bool | float | None]


class Metric(TypedDict):
    n: int
    value: float


class Interval(TypedDict):
    value: float
    low: float | None
    high: float | None
    n_defined: int
    n_resamples: int


class Rank(TypedDict):
    value: float | None
    n_physicians: int
    n_higher: int | None
    n_tied: int | None
    n_lower: int | None
    rank: int | None
    percentile: float | None


@dataclass(frozen=True)
class MetaEvalLabels:
    """Physician labels in the flat layout described in the module docstring."""

    item: np.ndarray
    category: np.ndarray
    physician: np.ndarray
    label: np.ndarray
    category_names: tuple[str, ...]
    physician_ids: tuple[str, ...]
    n_items: int

    def __post_init__(self) -> None:
        arrays = {}
        for name in ("item", "category", "physician"):
            arrays[name] = np.asarray(getattr(self, name), dtype=np.intp)
        arrays["label"] = np.asarray(self.label, dtype=bool)
        if any(a.ndim != 1 or a.shape != arrays["item"].shape for a in arrays.values()):
            raise ValueError("item, category, physician and label must be 1-D arrays of one length")
        for name, bound in (
            ("item", self.n_items),
            ("category", len(self.category_names)),
            ("physician", len(self.physician_ids)),
        ):
            a = arrays[name]
            if a.size and (a.min() < 0 or a.max() >= bound):
                raise ValueError(f"{name} codes must lie in [0, {bound})")
        # Per-category figures assume one category per item; a mix-up here would
        # silently split an item's pairs across categories.
        item_category = np.full(self.n_items, -1, dtype=np.intp)
        item_category[arrays["item"]] = arrays["category"]
        if not np.array_equal(item_category[arrays["item"]], arrays["category"]):
            raise ValueError("all labels of an item must share its category")
        for name, a in arrays.items():
            a.setflags(write=False)
            object.__setattr__(self, name, a)
        object.__setattr__(self, "category_names", tuple(self.category_names))
        object.__setattr__(self, "physician_ids", tuple(self.physician_ids))


def labels_from_rows(rows: Iterable[Mapping[str, Any]]) -> MetaEvalLabels:
    """Flatten meta-eval rows (``category``, ``binary_labels``, ``anonymized_physician_ids``).

    Items are numbered in row order; categories and physicians in order of first appearance.
    """
    categories: dict[str, int] = {}
    physicians: dict[str, int] = {}
    item, category, physician, label = [], [], [], []
    n_items = 0
    for index, row in enumerate(rows):
        labels, ids = row["binary_labels"], row["anonymized_physician_ids"]
        if len(labels) != len(ids):
            raise ValueError(f"row {index}: {len(labels)} labels but {len(ids)} physician ids")
        code = categories.setdefault(row["category"], len(categories))
        n_items = index + 1
        for verdict, pid in zip(labels, ids, strict=True):
            item.append(index)
            category.append(code)
            physician.append(physicians.setdefault(pid, len(physicians)))
            label.append(bool(verdict))
    return MetaEvalLabels(
        item=np.array(item, dtype=np.intp),
        category=np.array(category, dtype=np.intp),
        physician=np.array(physician, dtype=np.intp),
        label=np.array(label, dtype=bool),
        category_names=tuple(categories),
        physician_ids=tuple(physicians),
        n_items=n_items,
    )


def _grader(grader: GraderLabels, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (said_yes, present) boolean arrays from the grader's per-item labels."""
    g = np.asarray(grader, dtype=float)
    if g.shape != (n_items,):
        raise ValueError(f"grader labels must have shape ({n_items},), got {g.shape}")
    present = ~np.isnan(g)
    if not np.isin(g[present], (0.0, 1.0)).all():
        raise ValueError("grader labels must be 0/1, True/False or missing (NaN/None)")
    return g == 1.0, present


def _tallies(labels: MetaEvalLabels) -> tuple[np.ndarray, np.ndarray]:
    """Physician yes and no counts per item."""
    yes = np.bincount(labels.item, weights=labels.label, minlength=labels.n_items)
    total = np.bincount(labels.item, minlength=labels.n_items)
    yes = yes.astype(np.int64)
    return yes, total - yes


def _confusion(group: np.ndarray, cell: np.ndarray, n_groups: int, weight: np.ndarray | None = None) -> np.ndarray:
    flat = np.bincount(group * 4 + cell, weights=weight, minlength=n_groups * 4)
    # Weighted bincount sums in float64; the counts are small integers, so rint is exact.
    return np.rint(flat).astype(np.int64).reshape(n_groups, 4)


def _metric_table(counts: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every metric as (n, value) arrays over the leading axes of ``counts`` (..., 4).

    Undefined values are NaN. The arithmetic mirrors the reference step by step
    (ratio, then 2pr/(p+r), then the mean), so the golden files match to the last bit.
    """
    tn, fn, fp, tp = (counts[..., k] for k in (TN, FN, FP, TP))
    table: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for cls, hit, said, truth in (("pos", tp, tp + fp, tp + fn), ("neg", tn, tn + fn, tn + fp)):
            p, r = hit / said, hit / truth
            # Both zero is a defined F1 of 0, not 0/0.
            f1 = np.where((p == 0) & (r == 0), 0.0, 2 * (p * r) / (p + r))
            table[f"precision_{cls}"] = (said, p)
            table[f"recall_{cls}"] = (truth, r)
            table[f"f1_{cls}"] = (said + truth - hit, f1)
    for metric in METRICS:
        n_pos, v_pos = table[f"{metric}_pos"]
        n_neg, v_neg = table[f"{metric}_neg"]
        table[f"{metric}_balanced"] = (n_pos + n_neg, (v_pos + v_neg) / 2)
    return table


def macro_f1_from_counts(counts: np.ndarray) -> np.ndarray:
    """Macro F1 over the leading axes of (..., 4) pair counts in cell order (TN, FN, FP, TP)."""
    return _metric_table(counts)[MACRO_F1][1]


def _scope_prefixes(names: Sequence[str]) -> list[str]:
    # Category groups first, the overall group last (index = number of categories).
    return [f"{name}: " for name in names] + [""]


def _scope_order(n_scopes: int) -> list[int]:
    # Overall (the last group) first in every output dict, then categories in order.
    return [n_scopes - 1, *range(n_scopes - 1)]


def _with_overall(counts: np.ndarray) -> np.ndarray:
    """Append the overall group (sum over categories) on the category axis (-2)."""
    return np.concatenate([counts, counts.sum(axis=-2, keepdims=True)], axis=-2)


def _grader_counts(labels: MetaEvalLabels, grader: GraderLabels) -> np.ndarray:
    said_yes, present = _grader(grader, labels.n_items)
    graded = present[labels.item]
    cell = 2 * said_yes[labels.item[graded]] + labels.label[graded]
    counts = _confusion(labels.category[graded], cell, len(labels.category_names))
    return _with_overall(counts)


def grader_agreement(labels: MetaEvalLabels, grader: GraderLabels) -> dict[str, Metric]:
    """Pairwise agreement of the grader with every physician label, overall and per category."""
    table = _metric_table(_grader_counts(labels, grader))
    prefixes = _scope_prefixes(labels.category_names)
    out: dict[str, Metric] = {}
    for scope in _scope_order(len(prefixes)):
        for key, (n, value) in table.items():
            if not np.isnan(value[scope]):
                out[f"{prefixes[scope]}pairwise_model_{key}"] = {
                    "n": int(n[scope]),
                    "value": float(value[scope]),
                }
    return out


def physician_agreement(labels: MetaEvalLabels) -> dict[str, dict[str, Metric]]:
    """Each physician as rater against the other physicians' labels on the same items.

    Returns metric name -> physician id -> metric. Exclusion is by position, so a rater is
    never compared with their own label; physicians who only ever label alone have no
    pairs and appear nowhere.
    """
    yes, no = _tallies(labels)
    said = labels.label.astype(np.int64)
    n_cat = len(labels.category_names)
    group = labels.physician * n_cat + labels.category
    # Each label meets (yes - own) "yes" peers and (no - own) "no" peers on its item.
    cells = np.concatenate([2 * said + 1, 2 * said])
    weights = np.concatenate([yes[labels.item] - said, no[labels.item] - (1 - said)])
    counts = _confusion(np.concatenate([group, group]), cells, len(labels.physician_ids) * n_cat, weights)
    table = _metric_table(_with_overall(counts.reshape(len(labels.physician_ids), n_cat, 4)))
    prefixes = _scope_prefixes(labels.category_names)
    ids = np.array(labels.physician_ids, dtype=object)
    out: dict[str, dict[str, Metric]] = {}
    for scope in _scope_order(len(prefixes)):
        for key, (n, value) in table.items():
            rows = np.flatnonzero(~np.isnan(value[:, scope]))
            if rows.size:
                out[f"{prefixes[scope]}pairwise_physician_{key}"] = {
                    pid: {"n": nn, "value": vv}
                    for pid, nn, vv in zip(
                        ids[rows].tolist(), n[rows, scope].tolist(), value[rows, scope].tolist(), strict=True
                    )
                }
    return out


def bootstrap_f1_intervals(
    labels: MetaEvalLabels,
    grader: GraderLabels,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = None,
) -> dict[str, Interval]:
    """Percentile bootstrap intervals of the grader's macro F1, per category and overall.

    Items (with a grader label and at least one physician label) are resampled with
    replacement: within the category for per-category intervals, across all items for the
    overall one. An item's pairs depend only on (category, grader label, yes count, no
    count), so drawing n items is the same as a multinomial draw over those few item types;
    the cost follows the number of types, not items (about 0.1 s for 1000 resamples at the
    paper's size, against 30 million index draws done naively). Resamples in which the
    macro F1 is undefined are dropped from the percentiles and counted in ``n_defined``.
    Keys are the metric names, as in ``grader_agreement``; scopes whose macro F1 is
    undefined are left out.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must lie strictly between 0 and 1")
    rng = np.random.default_rng(seed)
    said_yes, present = _grader(grader, labels.n_items)
    yes, no = _tallies(labels)
    item_category = np.full(labels.n_items, -1, dtype=np.int64)
    item_category[labels.item] = labels.category
    keep = np.flatnonzero(present & (yes + no > 0))
    if keep.size == 0:
        return {}
    width = int((yes + no).max()) + 1
    kind = ((item_category[keep] * 2 + said_yes[keep]) * width + yes[keep]) * width + no[keep]
    kinds, freq = np.unique(kind, return_counts=True)
    k_no, rest = kinds % width, kinds // width
    k_yes, rest = rest % width, rest // width
    k_said, k_cat = rest % 2, rest // 2
    # Confusion cells contributed by one item of each type.
    cells = np.zeros((kinds.size, 4), dtype=np.int64)
    cells[:, TP] = np.where(k_said == 1, k_yes, 0)
    cells[:, FP] = np.where(k_said == 1, k_no, 0)
    cells[:, FN] = np.where(k_said == 0, k_yes, 0)
    cells[:, TN] = np.where(k_said == 0, k_no, 0)

    # Per category: pad each category's types to a common width so one call draws all.
    cats, starts, per_cat = np.unique(k_cat, return_index=True, return_counts=True)
    slot = np.arange(kinds.size) - np.repeat(starts, per_cat)
    row = np.repeat(np.arange(cats.size), per_cat)
    tally = np.zeros((cats.size, per_cat.max()), dtype=np.int64)
    tally[row, slot] = freq
    n_cat_items = tally.sum(axis=1)
    pvals = tally / n_cat_items[:, None]
    padded = np.zeros((cats.size, per_cat.max(), 4), dtype=np.int64)
    padded[row, slot] = cells
    draws = rng.multinomial(n_cat_items, pvals, size=(n_resamples, cats.size))
    per_cat_counts = np.einsum("bck,ckf->bcf", draws, padded)
    overall_draws = rng.multinomial(keep.size, freq / keep.size, size=n_resamples)
    overall_counts = overall_draws @ cells

    point = np.zeros((cats.size + 1, 4), dtype=np.int64)
    point[:-1] = np.einsum("ck,ckf->cf", tally, padded)
    point[-1] = freq @ cells
    point_f1 = _metric_table(point)[MACRO_F1][1]
    boot_f1 = _metric_table(np.concatenate([per_cat_counts, overall_counts[:, None]], axis=1))[MACRO_F1][1]

    prefixes = _scope_prefixes([labels.category_names[c] for c in cats.tolist()])
    tail = (1 - confidence) / 2
    out: dict[str, Interval] = {}
    for scope in _scope_order(len(prefixes)):
        if np.isnan(point_f1[scope]):
            continue
        defined = boot_f1[:, scope][~np.isnan(boot_f1[:, scope])]
        low, high = np.quantile(defined, [tail, 1 - tail]).tolist() if defined.size else (None, None)
        out[f"{prefixes[scope]}pairwise_model_{MACRO_F1}"] = {
            "value": float(point_f1[scope]),
            "low": low,
            "high": high,
            "n_defined": int(defined.size),
            "n_resamples": n_resamples,
        }
    return out


def grader_rank(
    model: Mapping[str, Metric],
    physicians: Mapping[str, Mapping[str, Metric]],
    *,
    metric: str = MACRO_F1,
    tie_tolerance: float = 1e-12,
) -> dict[str, Rank]:
    """Where the grader's score stands among the physicians', per scope (overall, categories).

    Takes the outputs of ``grader_agreement`` and ``physician_agreement``. Only physicians
    with a defined value in the scope take part. ``rank`` is 1 + the number of physicians
    strictly above the grader (competition ranking); ``percentile`` is the share of
    physicians the grader beats, a tie counting as half. Values within ``tie_tolerance``
    are ties, because equal F1s reached through different fractions can differ in the
    last bit. When the grader's value is undefined every comparison is None; when no
    physician has a value, ``percentile`` is None.
    """
    model_base, doc_base = f"pairwise_model_{metric}", f"pairwise_physician_{metric}"
    # dict.fromkeys keeps the callers' order (overall first) and drops repeats.
    scopes = dict.fromkeys(
        [k[: -len(model_base)] for k in model if k.endswith(model_base)]
        + [k[: -len(doc_base)] for k in physicians if k.endswith(doc_base)]
    )
    out: dict[str, Rank] = {}
    for prefix in scopes:
        grader_metric = model.get(prefix + model_base)
        values = np.array([m["value"] for m in physicians.get(prefix + doc_base, {}).values()])
        if grader_metric is None:
            out[prefix + model_base] = {
                "value": None,
                "n_physicians": values.size,
                "n_higher": None,
                "n_tied": None,
                "n_lower": None,
                "rank": None,
                "percentile": None,
            }
            continue
        value = grader_metric["value"]
        higher = int(np.sum(values > value + tie_tolerance))
        lower = int(np.sum(values < value - tie_tolerance))
        tied = values.size - higher - lower
        out[prefix + model_base] = {
            "value": value,
            "n_physicians": values.size,
            "n_higher": higher,
            "n_tied": tied,
            "n_lower": lower,
            "rank": higher + 1,
            "percentile": 100.0 * (lower + 0.5 * tied) / values.size if values.size else None,
        }
    return out


def majority_disagreements(labels: MetaEvalLabels, grader: GraderLabels) -> dict[str, list[Any]]:
    """Items where the grader's label differs from the physicians' strict majority.

    A tie among physicians has no majority, so it is not a disagreement; tied items the
    grader labelled are listed apart under ``tied_item`` because they are worth a look
    too. Disagreements come strongest first (widest yes/no margin), then by item index.
    """
    said_yes, present = _grader(grader, labels.n_items)
    yes, no = _tallies(labels)
    flagged = present & np.where(said_yes, no > yes, yes > no)
    items = np.flatnonzero(flagged)
    items = items[np.lexsort((items, -np.abs(yes[items] - no[items])))]
    item_category = np.zeros(labels.n_items, dtype=np.intp)
    item_category[labels.item] = labels.category
    names = np.array(labels.category_names, dtype=object)
    return {
        "item": items.tolist(),
        "category": names[item_category[items]].tolist(),
        "grader": said_yes[items].tolist(),
        "n_yes": yes[items].tolist(),
        "n_no": no[items].tolist(),
        "tied_item": np.flatnonzero(present & (yes == no) & (yes > 0)).tolist(),
    }


# The two causes a disagreement review separates (report keys, page views, CSV metric names).
PHYSICIANS_SPLIT = "physicians_split"
GRADER_AGAINST_AGREEING = "grader_against_agreeing_physicians"


def review_causes(labels: MetaEvalLabels, grader: GraderLabels) -> dict[str, Any]:
    """The items worth a review, by cause: "the criterion is ambiguous" or "the grader is wrong".

    ``physicians_split``: two or more physicians labelled the item and they do not all agree (a 2-1
    split as much as a tie), whatever the grader said. ``grader_against_agreeing_physicians``: two or
    more physicians agree and the grader, which labelled the item, says the opposite. Each comes
    with its items (widest margin first for the grader's, closest split first for the physicians')
    and a count per consensus criterion plus ``overall``.
    """
    said_yes, present = _grader(grader, labels.n_items)
    yes, no = _tallies(labels)
    several = (yes + no) >= 2
    split = several & (yes > 0) & (no > 0)
    unanimous = several & ~split
    against = unanimous & present & np.where(said_yes, yes == 0, no == 0)
    item_category = np.zeros(labels.n_items, dtype=np.intp)
    item_category[labels.item] = labels.category
    out: dict[str, Any] = {}
    for name, mask, key in (
        (PHYSICIANS_SPLIT, split, np.abs(yes - no)),
        (GRADER_AGAINST_AGREEING, against, -(yes + no)),
    ):
        items = np.flatnonzero(mask)
        items = items[np.lexsort((items, key[items]))]
        counts = np.bincount(item_category[items], minlength=len(labels.category_names))
        by_scope = {n: int(c) for n, c in zip(labels.category_names, counts.tolist(), strict=True)}
        by_scope["overall"] = int(items.size)
        out[name] = {"item": items.tolist(), "counts": by_scope}
    return out


def meta_eval_report(
    labels: MetaEvalLabels,
    grader: GraderLabels,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = None,
) -> dict[str, Any]:
    """Everything the meta-evaluation page shows, as one plain dict."""
    model = grader_agreement(labels, grader)
    physicians = physician_agreement(labels)
    return {
        "model": model,
        "physician": physicians,
        "intervals": bootstrap_f1_intervals(labels, grader, n_resamples=n_resamples, confidence=confidence, seed=seed),
        "rank": grader_rank(model, physicians),
        "disagreements": majority_disagreements(labels, grader),
        "review": review_causes(labels, grader),
    }
