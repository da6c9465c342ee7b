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
IntArray = npt.NDArray[np.int64]


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


def _tallies(labels: MetaEvalLabels) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.intp]]:
    """Physician yes and no counts per item, and each item's category."""
    yes = np.bincount(labels.item[labels.label], minlength=labels.n_items).astype(np.int64)
    no = np.bincount(labels.item, minlength=labels.n_items).astype(np.int64) - yes
    category = np.zeros(labels.n_items, dtype=np.intp)
    category[labels.item] = labels.category
    return yes, no, category


def _grader_items(labels: MetaEvalLabels, grader: GraderLabels) -> tuple[npt.NDArray[np.intp], IntArray, FloatArray]:
    """Per item the grader labelled: its category, a code of (grader said yes, yes, no), and
    the pair counts (TP, FP, FN, TN) of every code."""
    g = np.asarray(grader, dtype=float)
    if g.shape != (labels.n_items,):
        raise ValueError(f"grader labels must have shape ({labels.n_items},), got {g.shape}")
    yes, no, category = _tallies(labels)
    keep = ~np.isnan(g) & (yes + no > 0)
    width = int((yes + no).max(initial=0)) + 1
    code = ((g[keep] == 1.0).astype(np.int64) * width + yes[keep]) * width + no[keep]
    said, rest = np.divmod(np.arange(2 * width * width), width * width)
    y, n = np.divmod(rest, width)
    cells = np.column_stack([said * y, said * n, (1 - said) * y, (1 - said) * n]).astype(np.float64)
    return category[keep], code, cells


def _physician_items(labels: MetaEvalLabels) -> tuple[npt.NDArray[np.intp], IntArray, FloatArray]:
    """Per item with two or more physician labels: its category, a code of (yes, no), and the
    (disagreement, yes, no) sums of every code."""
    yes, no, category = _tallies(labels)
    keep = yes + no >= 2
    width = int((yes + no).max(initial=0)) + 1
    y, n = (x.astype(np.float64) for x in np.divmod(np.arange(width * width), width))
    with np.errstate(divide="ignore", invalid="ignore"):
        disagreement = np.where(y + n >= 2, y * n / (y + n - 1), 0.0)
    return category[keep], yes[keep] * width + no[keep], np.column_stack([disagreement, y, n])


def _resampled_sums(
    category: npt.NDArray[np.intp],
    code: IntArray,
    values: FloatArray,
    n_categories: int,
    n_resamples: int,
    rng: np.random.Generator,
) -> tuple[FloatArray, FloatArray]:
    """Summed ``values[code]`` per scope (categories, then overall): the point (C+1, K) and
    each bootstrap resample of items (B, C+1, K). A category without items sums to zeros."""
    n_codes, k = values.shape
    point = np.zeros((n_categories + 1, k))
    boot = np.zeros((n_resamples, n_categories + 1, k))
    if category.size == 0:
        return point, boot
    kinds, freq = np.unique(category.astype(np.int64) * n_codes + code, return_counts=True)
    type_cat, type_values = kinds // n_codes, values[kinds % n_codes]
    cats, starts, per_cat = np.unique(type_cat, return_index=True, return_counts=True)
    slot = np.arange(kinds.size) - np.repeat(starts, per_cat)
    row = np.repeat(np.arange(cats.size), per_cat)
    tally = np.zeros((cats.size, per_cat.max()), dtype=np.int64)
    tally[row, slot] = freq
    padded = np.zeros((cats.size, per_cat.max(), k))
    padded[row, slot] = type_values
    n_items = tally.sum(axis=1)
    draws = rng.multinomial(n_items, tally / n_items[:, None], size=(n_resamples, cats.size))
    boot[:, cats] = np.einsum("bct,ctk->bck", draws, padded)
    point[cats] = np.einsum("ct,ctk->ck", tally, padded)
    overall = rng.multinomial(int(freq.sum()), freq / freq.sum(), size=n_resamples)
    boot[:, -1] = overall @ type_values
    point[-1] = freq @ type_values
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
            "n": round(n[scope]),
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
    category, code, cells = _grader_items(labels, grader)
    point, boot = _resampled_sums(category, code, cells, len(labels.category_names), n_resamples, rng)
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
    category, code, units = _physician_items(labels)
    point, boot = _resampled_sums(category, code, units, len(labels.category_names), n_resamples, rng)
    alpha = alpha_from_sums(point[:, 0], point[:, 1], point[:, 2])
    boot_alpha = alpha_from_sums(boot[..., 0], boot[..., 1], boot[..., 2])
    return _describe(labels.category_names, ALPHA, alpha, boot_alpha, point[:, 1] + point[:, 2], confidence)
