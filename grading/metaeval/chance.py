"""Chance-corrected agreement, in plain numpy: Cohen's kappa and Krippendorff's alpha.

Raw agreement flatters a criterion that is nearly always "met": a grader that always says
"met" agrees with most physicians there. Both figures here subtract the agreement that the
raters' own label rates would give by chance (1 = perfect, 0 = chance, below 0 = worse).

* **Cohen's kappa, grader vs physicians**, from exactly the pairs behind the pairwise F1 of
  grading.metaeval.agreement: one (grader label, physician label) pair per physician label
  on an item the grader labelled. With TP, FP, FN, TN counted over those pairs,
  ``kappa = 2 (TP TN - FN FP) / ((TP + FP)(FP + TN) + (TP + FN)(FN + TN))``, which is what
  ``sklearn.metrics.cohen_kappa_score`` gives on the same two label lists.
* **Krippendorff's alpha (nominal), among physicians**: items are units, physicians the
  coders, grader left out. Only items with two or more physician labels can show
  (dis)agreement. With ``o`` the coincidences of differing labels (each item adds
  ``yes * no / (labels - 1)``) and ``n1``/``n0`` the pairable yes/no labels (``n`` in all),
  ``alpha = 1 - (n - 1) o / (n1 n0)``, as the ``krippendorff`` package computes it.

Undefined values are None, never NaN: kappa when there are no pairs or both sides used a
single, identical label everywhere (the chance agreement is then 1 and the ratio 0/0);
alpha when no item has two physician labels, or all pairable labels are of one class.

Intervals are percentile bootstraps over items, within the category for per-category
figures and across all items for the overall one; resamples in which the value is
undefined are dropped and counted in ``n_defined``. Items are drawn by type (all items that
contribute the same counts are interchangeable), so the cost follows the number of item
types rather than items.

Output: ``{name: {"value", "n", "low", "high", "n_defined", "n_resamples"}}`` with names
``cohen_kappa`` / ``krippendorff_alpha``, prefixed ``"<category>: "`` per category, overall
first; every category of the labels appears, with value None where undefined. ``n`` counts
pairs for kappa and pairable physician labels for alpha.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np
import numpy.typing as npt

from grading.metaeval.agreement import GraderLabels, MetaEvalLabels

KAPPA = "cohen_kappa"
ALPHA = "krippendorff_alpha"
FloatArray = npt.NDArray[np.float64]


class ChanceMetric(TypedDict):
    value: float | None
    n: int
    low: float | None
    high: float | None
    n_defined: int
    n_resamples: int


def kappa_from_counts(tp: npt.ArrayLike, fp: npt.ArrayLike, fn: npt.ArrayLike, tn: npt.ArrayLike) -> FloatArray:
    """Cohen's kappa of a 2x2 table (rater said yes/no against the other), NaN where undefined."""
    tp, fp, fn, tn = (np.asarray(x, dtype=np.float64) for x in (tp, fp, fn, tn))
    denominator = (tp + fp) * (fp + tn) + (tp + fn) * (fn + tn)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, 2 * (tp * tn - fn * fp) / denominator, np.nan)


def alpha_from_sums(disagreement: npt.ArrayLike, yes: npt.ArrayLike, no: npt.ArrayLike) -> FloatArray:
    """Binary nominal Krippendorff's alpha from summed coincidences of differing labels and
    the pairable yes / no label counts; NaN where undefined."""
    o, n1, n0 = (np.asarray(x, dtype=np.float64) for x in (disagreement, yes, no))
    expected = n1 * n0
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected > 0, 1.0 - (n1 + n0 - 1.0) * o / expected, np.nan)


def _grader_pair_cells(labels: MetaEvalLabels, grader: GraderLabels) -> tuple[npt.NDArray[np.intp], FloatArray]:
    """Per item the grader labelled: its category and its pair counts (TP, FP, FN, TN)."""
    g = np.asarray(grader, dtype=float)
    if g.shape != (labels.n_items,):
        raise ValueError(f"grader labels must have shape ({labels.n_items},), got {g.shape}")
    present = ~np.isnan(g)
    said = g == 1.0
    yes = np.bincount(labels.item, weights=labels.label, minlength=labels.n_items)
    total = np.bincount(labels.item, minlength=labels.n_items).astype(np.float64)
    no = total - yes
    category = np.zeros(labels.n_items, dtype=np.intp)
    category[labels.item] = labels.category
    keep = present & (total > 0)
    cells = np.column_stack([
        np.where(said, yes, 0.0), np.where(said, no, 0.0), np.where(said, 0.0, yes), np.where(said, 0.0, no)
    ])  # fmt: skip
    return category[keep], cells[keep]


def _physician_units(labels: MetaEvalLabels) -> tuple[npt.NDArray[np.intp], FloatArray]:
    """Per item with two or more physician labels: its category and (disagreement, yes, no)."""
    yes = np.bincount(labels.item, weights=labels.label, minlength=labels.n_items)
    total = np.bincount(labels.item, minlength=labels.n_items).astype(np.float64)
    no = total - yes
    category = np.zeros(labels.n_items, dtype=np.intp)
    category[labels.item] = labels.category
    keep = total >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        disagreement = np.where(keep, yes * no / (total - 1), 0.0)
    return category[keep], np.column_stack([disagreement, yes, no])[keep]


def _resampled_sums(
    category: npt.NDArray[np.intp], features: FloatArray, n_categories: int, n_resamples: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """Summed features per scope (categories, then overall): the point (C+1, K) and each
    bootstrap resample of items (B, C+1, K). A category without items sums to zeros."""
    k = features.shape[1]
    point = np.zeros((n_categories + 1, k))
    boot = np.zeros((n_resamples, n_categories + 1, k))
    if category.size == 0:
        return point, boot
    types, freq = np.unique(np.column_stack([category.astype(np.float64), features]), axis=0, return_counts=True)
    type_cat, values = types[:, 0].astype(np.intp), types[:, 1:]
    cats, starts, per_cat = np.unique(type_cat, return_index=True, return_counts=True)
    slot = np.arange(type_cat.size) - np.repeat(starts, per_cat)
    row = np.repeat(np.arange(cats.size), per_cat)
    tally = np.zeros((cats.size, per_cat.max()), dtype=np.int64)
    tally[row, slot] = freq
    padded = np.zeros((cats.size, per_cat.max(), k))
    padded[row, slot] = values
    n_items = tally.sum(axis=1)
    draws = rng.multinomial(n_items, tally / n_items[:, None], size=(n_resamples, cats.size))
    boot[:, cats] = np.einsum("bct,ctk->bck", draws, padded)
    point[cats] = np.einsum("ct,ctk->ck", tally, padded)
    overall = rng.multinomial(int(freq.sum()), freq / freq.sum(), size=n_resamples)
    boot[:, -1] = overall @ values
    point[-1] = freq @ values
    return point, boot


def _describe(
    names: tuple[str, ...], metric: str, point: FloatArray, boot: FloatArray, n: FloatArray, confidence: float
) -> dict[str, ChanceMetric]:
    tail = (1 - confidence) / 2
    prefixes = [*(f"{name}: " for name in names), ""]
    out: dict[str, ChanceMetric] = {}
    for scope in [len(names), *range(len(names))]:  # overall first
        value = point[scope]
        defined = boot[:, scope][~np.isnan(boot[:, scope])]
        low, high = (float(x) for x in np.quantile(defined, [tail, 1 - tail])) if defined.size else (None, None)
        out[f"{prefixes[scope]}{metric}"] = {
            "value": None if np.isnan(value) else float(value),
            "n": int(round(n[scope])),
            "low": None if np.isnan(value) else low,
            "high": None if np.isnan(value) else high,
            "n_defined": int(defined.size),
            "n_resamples": int(boot.shape[0]),
        }
    return out


def grader_kappa(
    labels: MetaEvalLabels,
    grader: GraderLabels,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = None,
) -> dict[str, ChanceMetric]:
    """Cohen's kappa of the grader against every physician label, per category and overall."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must lie strictly between 0 and 1")
    rng = np.random.default_rng(seed)
    category, cells = _grader_pair_cells(labels, grader)
    point, boot = _resampled_sums(category, cells, len(labels.category_names), n_resamples, rng)
    kappa = kappa_from_counts(*point.T)
    boot_kappa = kappa_from_counts(boot[..., 0], boot[..., 1], boot[..., 2], boot[..., 3])
    return _describe(labels.category_names, KAPPA, kappa, boot_kappa, point.sum(axis=1), confidence)


def physician_alpha(
    labels: MetaEvalLabels,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = None,
) -> dict[str, ChanceMetric]:
    """Krippendorff's alpha (nominal) among the physicians, per category and overall."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must lie strictly between 0 and 1")
    rng = np.random.default_rng(seed)
    category, units = _physician_units(labels)
    point, boot = _resampled_sums(category, units, len(labels.category_names), n_resamples, rng)
    alpha = alpha_from_sums(point[:, 0], point[:, 1], point[:, 2])
    boot_alpha = alpha_from_sums(boot[..., 0], boot[..., 1], boot[..., 2])
    return _describe(labels.category_names, ALPHA, alpha, boot_alpha, point[:, 1] + point[:, 2], confidence)
