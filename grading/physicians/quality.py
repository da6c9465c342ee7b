"""Physician quality in plain numpy: agreement with peers, active time, can't-judge rate, outliers.

No Django here; grading/physicians/selectors.py loads the arrays and the page, the CSV and the
API all call these functions.

* **Agreement** reuses the meta-eval's layout (grading.metaeval.agreement.MetaEvalLabels) and
  its pairs: each label of a physician meets every other physician's label on the same item,
  one pair each, as the reference's physician baseline pairs them. From a physician's pair
  counts come their pairwise macro F1 (``macro_f1_from_counts``: the reference's
  ``pairwise_physician_f1_balanced``) and Cohen's kappa (``kappa_from_counts``: what
  ``sklearn.metrics.cohen_kappa_score`` gives on the two lists of paired labels). Intervals
  are percentile bootstraps over the physician's shared items (items drawn with replacement,
  by type: an item adds pairs that depend only on (own label, peers' yes, peers' no)).
* **Median active time** with its order-statistic interval (distribution-free).
* **Active time** of a task: the sum of the gaps between its recorded events (page opened,
  draft saved, answer sent), each gap longer than the idle setting cut out.
* **Outliers**: a physician whose interval lies wholly on the wrong side of the other
  physicians' median, and by a material margin, is flagged with the figure behind it.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from grading.metaeval.agreement import FN, FP, TN, TP, MetaEvalLabels, macro_f1_from_counts
from grading.metaeval.chance import kappa_from_counts

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Estimate(TypedDict):
    value: float | None
    low: float | None
    high: float | None


class LabelAgreement(TypedDict):
    n_items: int
    n_pairs: int
    macro_f1: Estimate
    kappa: Estimate


def _none(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _estimate(point: float, boot: FloatArray, confidence: float) -> Estimate:
    defined = boot[~np.isnan(boot)]
    tail = (1 - confidence) / 2
    if np.isnan(point) or defined.size == 0:
        return {"value": _none(point), "low": None, "high": None}
    low, high = np.quantile(defined, [tail, 1 - tail]).tolist()
    return {"value": float(point), "low": low, "high": high}


def _estimates(points: FloatArray, boot: FloatArray, confidence: float) -> list[Estimate]:
    """`_estimate` for every column of `boot` (draws × physicians) at once: one quantile call
    over the columns without undefined draws, which gives each column's own quantiles (the
    same partition and interpolation per column); the rest one by one."""
    tail = (1 - confidence) / 2
    whole = np.logical_not(np.isnan(boot).any(axis=0), dtype=bool)
    bounds = np.quantile(boot[:, whole], [tail, 1 - tail], axis=0) if boot.size else np.zeros((2, 0))
    lows, highs = np.full(boot.shape[1], np.nan), np.full(boot.shape[1], np.nan)
    lows[whole], highs[whole] = bounds[0], bounds[1]
    out: list[Estimate] = []
    for index, point in enumerate(points.tolist()):
        if np.isnan(point) or not whole[index]:
            out.append(_estimate(point, boot[:, index], confidence))
        else:
            out.append({"value": point, "low": float(lows[index]), "high": float(highs[index])})
    return out


def pair_cells(labels: MetaEvalLabels) -> tuple[IntArray, IntArray, IntArray]:
    """Per label: its physician, a code of (own label, peers' yes, peers' no), and the width
    the code uses; labels alone on their item are dropped (they have no pairs)."""
    yes = np.bincount(labels.item[labels.label], minlength=labels.n_items).astype(np.int64)
    total = np.bincount(labels.item, minlength=labels.n_items).astype(np.int64)
    own = labels.label.astype(np.int64)
    peers_yes = yes[labels.item] - own
    peers_no = (total - yes)[labels.item] - (1 - own)
    keep = peers_yes + peers_no > 0
    width = int(total.max(initial=0)) + 1
    code = (own[keep] * width + peers_yes[keep]) * width + peers_no[keep]
    return labels.physician[keep].astype(np.int64), code, np.array([width], dtype=np.int64)


def _code_cells(width: int) -> IntArray:
    """Pair counts (TN, FN, FP, TP order) of every code of `pair_cells`."""
    own, rest = np.divmod(np.arange(2 * width * width), width * width)
    peers_yes, peers_no = np.divmod(rest, width)
    cells = np.zeros((own.size, 4), dtype=np.int64)
    cells[:, TP] = own * peers_yes
    cells[:, FP] = own * peers_no
    cells[:, FN] = (1 - own) * peers_yes
    cells[:, TN] = (1 - own) * peers_no
    return cells


def _figures(counts: IntArray) -> tuple[FloatArray, FloatArray]:
    """(macro F1, kappa) over the leading axes of (..., 4) pair counts."""
    f1 = macro_f1_from_counts(counts)
    kappa = kappa_from_counts(counts[..., TP], counts[..., FP], counts[..., FN], counts[..., TN])
    return f1, kappa


def label_agreement(
    labels: MetaEvalLabels,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[int, LabelAgreement]:
    """Per physician code with at least one shared item: macro F1 and kappa with intervals."""
    rng = np.random.default_rng(seed)
    physician, code, (width,) = pair_cells(labels)
    cells = _code_cells(int(width))
    n_codes = cells.shape[0]
    n_physicians = len(labels.physician_ids)
    freq = np.bincount(physician * n_codes + code, minlength=n_physicians * n_codes).reshape(n_physicians, n_codes)
    f1, kappa = _figures(freq @ cells)
    # Only the item types that occur, and only physicians with shared items: one draw for all.
    used = np.flatnonzero(freq.sum(axis=0))
    rows = np.flatnonzero(freq.sum(axis=1))
    tally = freq[np.ix_(rows, used)]
    n_items = tally.sum(axis=1)
    out: dict[int, LabelAgreement] = {}
    if rows.size == 0:
        return out
    draws = _multinomial(rng, n_items, tally / n_items[:, None], n_resamples)
    boot_f1, boot_kappa = _figures(draws @ cells[used])
    counts = tally @ cells[used]
    f1_estimates = _estimates(f1[rows], boot_f1, confidence)
    kappa_estimates = _estimates(kappa[rows], boot_kappa, confidence)
    for index, p in enumerate(rows.tolist()):
        out[p] = {
            "n_items": int(n_items[index]),
            "n_pairs": int(counts[index].sum()),
            "macro_f1": f1_estimates[index],
            "kappa": kappa_estimates[index],
        }
    return out


def _multinomial(rng: np.random.Generator, n: IntArray, pvals: FloatArray, size: int) -> IntArray:
    """`size` multinomial draws for every row of (n, pvals) at once, shape (size, rows, types):
    each type's count a binomial of what the earlier types left (the exact conditional
    method), one vectorised call per type instead of one call per row and draw."""
    rows, types = pvals.shape
    out = np.zeros((size, rows, types), dtype=np.int64)
    left = np.broadcast_to(n, (size, rows)).astype(np.int64)
    mass = np.ones(rows)
    for t in range(types - 1):
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.clip(np.where(mass > 0, pvals[:, t] / mass, 0.0), 0.0, 1.0)
        out[:, :, t] = rng.binomial(left, p)
        left = left - out[:, :, t]
        mass = mass - pvals[:, t]
    out[:, :, types - 1] = left
    return out


def active_seconds(task: npt.ArrayLike, at: npt.ArrayLike, *, n_tasks: int, idle_seconds: float) -> FloatArray:
    """Per task code in [0, n_tasks): the sum of the gaps between its events (seconds since any
    fixed origin), each gap over `idle_seconds` cut out. A task with one event has 0."""
    codes = np.asarray(task, dtype=np.int64)
    times = np.asarray(at, dtype=np.float64)
    order = np.lexsort((times, codes))
    codes, times = codes[order], times[order]
    gap = np.diff(times)
    counted = (codes[1:] == codes[:-1]) & (gap <= idle_seconds)
    return np.bincount(codes[1:][counted], weights=gap[counted], minlength=n_tasks).astype(np.float64)


def median_interval(values: npt.ArrayLike, *, confidence: float = 0.95) -> Estimate:
    """The median with its distribution-free interval: order statistics [x_(r), x_(n-r+1)], r
    the largest with P(B <= r - 1) <= (1 - confidence) / 2 for B ~ Binomial(n, 1/2), so its
    coverage is at least `confidence` whatever the distribution of times (None for no values;
    no interval for fewer than six values at 95%)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    if n == 0:
        return {"value": None, "low": None, "high": None}
    k = np.arange(1, n + 1, dtype=np.float64)
    log_choose = np.concatenate([[0.0], np.cumsum(np.log((n - k + 1) / k))])
    cdf = np.cumsum(np.exp(log_choose - n * np.log(2.0)))
    r = int(np.count_nonzero(cdf <= (1 - confidence) / 2))
    if r == 0:
        return {"value": float(np.median(x)), "low": None, "high": None}
    return {"value": float(np.median(x)), "low": float(x[r - 1]), "high": float(x[n - r])}


def rate_interval(hits: int, n: int, *, confidence: float = 0.95) -> Estimate:
    """A share with its Wilson score interval (None for n = 0)."""
    if n == 0:
        return {"value": None, "low": None, "high": None}
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return {"value": p, "low": max(0.0, centre - half), "high": min(1.0, centre + half)}


@dataclass(frozen=True)
class OutlierRule:
    """How far from the others a physician must be to be flagged (settings, documented)."""

    agreement_margin: float = 0.10
    slow_factor: float = 1.5
    cant_judge_margin: float = 0.10


class Flag(TypedDict):
    measure: str
    value: float
    bound: float
    others_median: float


def outliers(
    agreement: dict[int, Estimate],
    seconds: dict[int, Estimate],
    cant_judge: dict[int, Estimate],
    rule: OutlierRule,
) -> dict[int, list[Flag]]:
    """Per physician code, the measures on which they stand apart from the others' median:
    agreement (macro F1) whose interval lies wholly below it by more than the margin, active
    time whose interval lies wholly above `slow_factor` times it, a can't-judge rate whose
    interval lies wholly above it plus the margin."""
    flags: dict[int, list[Flag]] = {}
    for measure, table, side in (
        ("agreement", agreement, "high"),
        ("active_time", seconds, "low"),
        ("cant_judge", cant_judge, "low"),
    ):
        defined = {p: e for p, e in table.items() if e["value"] is not None and e[side] is not None}  # type: ignore[literal-required]
        medians = _medians_of_others(np.array([float(e["value"]) for e in defined.values()]))  # type: ignore[arg-type]
        for (p, estimate), median in zip(defined.items(), medians.tolist(), strict=True):
            if np.isnan(median):
                continue
            bound = float(estimate[side])  # type: ignore[literal-required]
            if _apart(measure, bound, median, rule):
                flags.setdefault(p, []).append(
                    {"measure": measure, "value": float(estimate["value"]), "bound": bound, "others_median": median}  # type: ignore[arg-type]
                )
    return flags


def _medians_of_others(values: FloatArray) -> FloatArray:
    """For each value, the median of all the others (NaN when there are none), from one sort
    instead of a median per physician: leaving out the value at sorted position k shifts the
    positions from k on by one. Two middle values are averaged as np.median does, (a + b) / 2."""
    n = values.size
    if n < 2:
        return np.full(n, np.nan)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    m = n - 1

    def others_at(j: int) -> FloatArray:
        # The j-th smallest of the others, for every left-out position at once.
        return ordered[np.where(j < position, j, j + 1)]

    if m % 2:
        return others_at(m // 2)
    return (others_at(m // 2 - 1) + others_at(m // 2)) / 2


def _apart(measure: str, bound: float, median: float, rule: OutlierRule) -> bool:
    if measure == "agreement":
        return bound < median - rule.agreement_margin
    if measure == "active_time":
        return bound > median * rule.slow_factor
    return bound > median + rule.cant_judge_margin
