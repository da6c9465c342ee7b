"""The bootstrap std of run metrics: how the resamples are drawn.

Plain numpy, no Django (grading/reports/scoring.py asks it for each metric's
``:bootstrap_std``). Every method draws n of a metric's n examples with replacement, as
simple-evals does, except the Poisson-weighted ``SHARED`` kept for runs recorded with it;
they differ in how many draws serve how many metrics (tests/test_reference_bootstrap.py holds
each to the reference's distribution).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
Seed = int | np.random.Generator | None

N_RESAMPLES = 1000
# The bootstrap index matrix is drawn in row blocks of about this many entries, so that
# 80,000 responses x 1000 resamples never sits in memory at once (it would be 640 MB).
_BOOTSTRAP_BLOCK = 1 << 22
_BOOTSTRAP_THREADS, _BLOCKS_IN_FLIGHT = 2, 3  # see shared_bootstrap_stds
# How a run's bootstrap std is drawn (Run.bootstrap): one multinomial resampling shared by the
# metrics of the same examples, drawn n of n as the reference draws it (every run from issue 27
# on); the Poisson-weighted resampling shared by every metric (runs recorded before, whose stds
# are a few per cent high at small n); or one resampling per metric (runs recorded before that).
MULTINOMIAL, SHARED, PER_METRIC = "multinomial", "shared", "per-metric"
# Runs launched since issue 32 draw as the reference does too, with one draw of the examples per
# resample for the larger sets of examples (one_draw_bootstrap_stds): the same distribution as
# MULTINOMIAL for every metric at about half its cost. MULTINOMIAL runs keep their numbers.
ONE_DRAW = "one-draw"
BOOTSTRAP_LABELS = {
    ONE_DRAW: "1000 resamples of n examples drawn with replacement (the reference's draw), "
    "one draw of the examples per resample shared by the metrics",
    MULTINOMIAL: "1000 resamples of n examples drawn with replacement (the reference's draw), "
    "shared by the metrics of the same examples",
    SHARED: "1000 Poisson-weighted resamples shared by every metric (high by up to 14% at n <= 10)",
    PER_METRIC: "1000 resamples of n examples drawn with replacement, one resampling per metric",
}
# A multinomial draw per distinct value costs about as much as 16 index draws.
_DISTINCT_RATIO = 16


def bootstrap_std(values: npt.ArrayLike, *, n_resamples: int = N_RESAMPLES, seed: Seed = None) -> float:
    """Population std of the clipped means of resamples drawn with replacement.

    ``seed`` is an int, None, or a ``numpy.random.Generator`` (which this advances)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("no values to resample")
    rng = np.random.default_rng(seed)
    n = v.size
    distinct, counts = np.unique(v, return_counts=True)
    if distinct.size * _DISTINCT_RATIO <= n:
        # n draws from the values, told apart only by value, are one multinomial draw over
        # the distinct values: the same distribution at O(distinct) instead of O(n) cost.
        # Tag scores are often a handful of fractions (a cluster tag is 0 or 1).
        tallies = rng.multinomial(n, counts / n, size=n_resamples)
        return float(np.clip(tallies @ distinct / n, 0.0, 1.0).std())
    rows = max(1, _BOOTSTRAP_BLOCK // n)
    means = np.empty(n_resamples)
    for start in range(0, n_resamples, rows):
        stop = min(start + rows, n_resamples)
        index = rng.integers(0, n, size=(stop - start, n), dtype=np.int32 if n < 2**31 else np.int64)
        means[start:stop] = v[index].mean(axis=1)
    return float(np.clip(means, 0.0, 1.0).std())


def _poisson_table(bits: int = 16) -> npt.NDArray[np.float32]:
    """Poisson(1) counts by inverse CDF for every ``bits``-bit random integer: one table look-up
    per count instead of a draw and a tally per resampled example."""
    k = np.arange(32)
    cdf = np.cumsum(np.exp(-1.0) / np.cumprod(np.r_[1.0, k[1:]]))
    thresholds = np.round(cdf * (1 << bits))
    return np.searchsorted(thresholds, np.arange(1 << bits), side="right").astype(np.float32)


_POISSON = _poisson_table()


def shared_bootstrap_stds(values: npt.ArrayLike, *, n_resamples: int = N_RESAMPLES, seed: Seed = None) -> FloatArray:
    """The bootstrap std of every column's clipped mean from one resampling of the rows.

    ``values`` is (examples x metrics), NaN where an example lacks the metric. Each resample
    gives every example a count, Poisson(1) (the Poisson bootstrap: at hundreds of examples
    and more it is the multinomial draw of n examples but for a count that varies by about
    sqrt(n), and it costs a table look-up per example instead of a draw and a tally). Every
    metric's mean in the resample is then the count-weighted mean over the examples that
    have it: one matrix product for all metrics instead of a resampling per metric. A
    resample that drew none of a metric's examples says nothing about it and is left out
    of its std."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] == 0:
        raise ValueError("values must be a non-empty (examples x metrics) matrix")
    rng = np.random.default_rng(seed)
    n, m = v.shape
    present = ~np.isnan(v)
    # Metrics present on the same examples (overall, the axes, ...) share one count column.
    packed = np.packbits(present, axis=0)
    first_of: dict[bytes, int] = {}
    mask_of = np.array([first_of.setdefault(packed[:, j].tobytes(), len(first_of)) for j in range(m)], dtype=np.intp)
    masks = present[:, [list(mask_of).index(i) for i in range(len(first_of))]]
    # Centred on each metric's mean, the sums stay small and float32 keeps them to ~1e-7 of
    # the spread of the resampled means; float32 halves the cost of the product.
    centre = np.array([v[present[:, j], j].mean() for j in range(m)])
    weights = np.concatenate([np.where(present, v - centre, 0.0), masks], axis=1).astype(np.float32)
    means = np.empty((n_resamples, m))

    def resampled_means(start: int, draws: npt.NDArray[np.uint16]) -> None:
        sums = (_POISSON[draws] @ weights).astype(np.float64)
        totals = sums[:, m:][:, mask_of]
        with np.errstate(invalid="ignore", divide="ignore"):
            means[start : start + len(draws)] = np.where(totals > 0, sums[:, :m] / totals + centre, np.nan)

    # The draws stay one stream, in order (the numbers do not depend on the threads); the
    # look-up and the product of each block, about three times the cost of drawing it, run in
    # helper threads while the next blocks are drawn. The drawing and the product release the
    # GIL, so they overlap; the look-up holds it and OpenBLAS runs one product at a time, so
    # two helpers gain little over one. At most _BLOCKS_IN_FLIGHT blocks are held at once.
    rows = max(1, _BOOTSTRAP_BLOCK // n)
    with ThreadPoolExecutor(max_workers=_BOOTSTRAP_THREADS) as pool:
        pending: list[Future] = []
        for start in range(0, n_resamples, rows):
            draws = rng.integers(0, _POISSON.size, size=(min(rows, n_resamples - start), n), dtype=np.uint16)
            if len(pending) == _BLOCKS_IN_FLIGHT:
                pending.pop(0).result()
            pending.append(pool.submit(resampled_means, start, draws))
        for block in pending:
            block.result()
    clipped = np.clip(means, 0.0, 1.0)
    drawn = ~np.isnan(clipped)
    k = np.maximum(drawn.sum(axis=0), 1)
    mean = np.where(drawn, clipped, 0.0).sum(axis=0) / k
    return np.sqrt((np.where(drawn, clipped - mean, 0.0) ** 2).sum(axis=0) / k)


def _example_sets(values: npt.ArrayLike) -> tuple[FloatArray, npt.NDArray[np.bool_], dict[bytes, list[int]]]:
    """``values`` as a float matrix, where each column has a value, and the columns grouped by
    the set of examples that have them (the columns of one set share a resampling)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] == 0:
        raise ValueError("values must be a non-empty (examples x metrics) matrix")
    present = ~np.isnan(v)
    groups: dict[bytes, list[int]] = {}
    for j in range(v.shape[1]):
        if present[:, j].any():
            groups.setdefault(np.packbits(present[:, j]).tobytes(), []).append(j)
    return v, present, groups


def multinomial_bootstrap_stds(
    values: npt.ArrayLike, *, n_resamples: int = N_RESAMPLES, seed: Seed = None
) -> FloatArray:
    """The bootstrap std of every column's clipped mean, as the reference draws it, with one
    resampling per set of examples rather than per metric.

    ``values`` is (examples x metrics), NaN where an example lacks the metric. The columns
    present on the same examples (overall, most axes, ...) share one draw: each resample gives
    those n examples multinomial counts, n draws with replacement (the reference's
    ``np.random.choice(values, len(values))`` told apart only by which example was drawn), and
    every column's resampled mean is one matrix product with the counts. So each metric's
    resampled means have exactly the reference's distribution, whichever other metrics the run
    has; only the random numbers differ."""
    v, present, groups = _example_sets(values)
    # A stream of its own per set of examples, so the numbers do not depend on the threads; the
    # draws, reads and products release the GIL, so the sets are resampled side by side.
    streams = np.random.default_rng(seed).spawn(len(groups))
    stds = np.zeros(v.shape[1])
    with ThreadPoolExecutor(max_workers=_BOOTSTRAP_THREADS) as pool:
        done = [
            pool.submit(_resampled_means, v[present[:, columns[0]]][:, columns], n_resamples, stream)
            for columns, stream in zip(groups.values(), streams, strict=True)
        ]
        for columns, means in zip(groups.values(), done, strict=True):
            stds[columns] = np.clip(means.result(), 0.0, 1.0).std(axis=0)
    return stds


# A set of examples at least this share of the run's takes part in the one draw per resample;
# smaller ones (a cluster's) draw on their own, mostly over a handful of distinct values.
_ONE_DRAW_SHARE = 1 / 16


def one_draw_bootstrap_stds(values: npt.ArrayLike, *, n_resamples: int = N_RESAMPLES, seed: Seed = None) -> FloatArray:
    """The bootstrap std of every column's clipped mean, each metric resampled as the reference
    resamples it (n of its n examples with replacement), from one draw per resample.

    ``values`` is (examples x metrics), NaN where an example lacks the metric. Each resample
    draws N of the N examples with replacement, in order. The draws that fall among a set of
    n examples, in that order, are draws with replacement from those n; a set takes its first n
    (or all of them and as many more fresh draws). So every metric's resampled mean has exactly
    the distribution of :func:`multinomial_bootstrap_stds` (the reference's), while one draw,
    one tally and one matrix product serve the overall score, the axes, the themes and the
    levels together, instead of a draw of their own each. Sets under ``_ONE_DRAW_SHARE`` of the
    examples are resampled on their own (:func:`_resampled_means`)."""
    v, present, groups = _example_sets(values)
    size = v.shape[0]
    together = [c for c in groups.values() if present[:, c[0]].sum() >= size * _ONE_DRAW_SHARE]
    alone = [c for c in groups.values() if present[:, c[0]].sum() < size * _ONE_DRAW_SHARE]
    streams = np.random.default_rng(seed).spawn(len(alone) + 1)
    stds = np.zeros(v.shape[1])
    for columns, stream in zip(alone, streams[1:], strict=True):
        means = _resampled_means(v[present[:, columns[0]]][:, columns], n_resamples, stream)
        stds[columns] = np.clip(means, 0.0, 1.0).std(axis=0)
    if together:
        drawn = _one_draw_means(v, present, together, n_resamples, streams[0])
        for columns, means in zip(together, drawn, strict=True):
            stds[columns] = np.clip(means, 0.0, 1.0).std(axis=0)
    return stds


class _DrawSet(NamedTuple):
    """One set of examples in the one draw: its columns of the weight matrix and its values."""

    members: IntArray  # rows of the examples in the set
    mask: npt.NDArray[np.bool_]  # (N,) membership
    values: FloatArray  # (N x k) centred values, 0 outside the set
    centre: FloatArray  # (k,)
    first: int  # its first column in the weight matrix; its count column is first + k


def _one_draw_means(
    v: FloatArray, present: npt.NDArray[np.bool_], groups: list[list[int]], n_resamples: int, rng: np.random.Generator
) -> list[FloatArray]:
    """(resamples x columns) resampled means of each set of examples in ``groups``, one draw."""
    size = v.shape[0]
    sets, blocks, first = [], [], 0
    for columns in groups:
        mask = present[:, columns[0]]
        centre = v[mask][:, columns].mean(axis=0)
        values = np.where(mask[:, None], v[:, columns] - centre, 0.0)
        sets.append(_DrawSet(np.flatnonzero(mask), mask, values, centre, first))
        blocks += [values, mask[:, None].astype(np.float64)]
        first += len(columns) + 1
    # Centred values and each set's membership: the product of a resample's tally with this
    # gives every set's sum over all its draws and how many draws fell in it.
    weights = np.concatenate(blocks, axis=1)
    out = [np.empty((n_resamples, len(columns))) for columns in groups]
    rows = max(1, _BOOTSTRAP_BLOCK // size)
    for start in range(0, n_resamples, rows):
        count = min(rows, n_resamples - start)
        # Each row's draws moved to a range of their own, in place, so that one tally counts
        # every row (an int64 draw costs what an int32 one does, and needs no copy to move).
        offsets = np.arange(count, dtype=np.int64)[:, None] * size
        index = rng.integers(0, size, size=(count, size), dtype=np.int64)
        index += offsets
        tally = np.bincount(index.ravel(), minlength=count * size).reshape(count, size)
        sums = tally.astype(np.float64) @ weights
        index -= offsets
        for draw_set, means in zip(sets, out, strict=True):
            k, n = draw_set.values.shape[1], draw_set.members.size
            total = sums[:, draw_set.first : draw_set.first + k]
            extra = np.rint(sums[:, draw_set.first + k]).astype(np.int64) - n
            over, under = np.flatnonzero(extra > 0), np.flatnonzero(extra < 0)
            if over.size:
                total[over] -= _last_draws_sum(index, over, extra[over], draw_set)
            if under.size:
                total[under] += _fresh_draws_sum(rng, -extra[under], draw_set)
            means[start : start + count] = total / n + draw_set.centre
    return out


def _last_draws_sum(index: npt.NDArray, rows: IntArray, extra: IntArray, draw_set: _DrawSet) -> FloatArray:
    """Per row ``rows`` of ``index``, the sum of the values of its last ``extra`` draws within the set:
    what a set that drew more than its n examples leaves out, keeping its first n."""
    size, n = index.shape[1], draw_set.members.size
    # The tail of each row that holds the extra draws: a tail of t draws holds about t * n / size
    # of the set's, give or take their square root; lengthened if a row's tail holds too few
    # (the whole row always holds enough).
    most = int(extra.max())
    tail = min(size, int((most + 4 * most**0.5 + 8) * size / n))
    while True:
        drawn = index[rows, size - tail :]
        inside = draw_set.mask[drawn]
        from_end = np.cumsum(inside[:, ::-1], axis=1, dtype=np.int32)[:, ::-1]
        if tail == size or (from_end[:, 0] >= extra).all():
            break
        tail = min(size, 2 * tail)
    # The draws from the row's last `extra` within the set on; those outside it are worth 0.
    left_out = from_end <= extra[:, None]
    return np.stack([np.where(left_out, column[drawn], 0.0).sum(axis=1) for column in draw_set.values.T], axis=1)


def _fresh_draws_sum(rng: np.random.Generator, missing: IntArray, draw_set: _DrawSet) -> FloatArray:
    """Per row, the sum of the values of ``missing`` more draws with replacement from the set:
    what a set that drew fewer than its n examples adds."""
    picks = draw_set.members[rng.integers(0, draw_set.members.size, size=(missing.size, int(missing.max())))]
    wanted = np.arange(picks.shape[1]) < missing[:, None]
    return np.stack([np.where(wanted, column[picks], 0.0).sum(axis=1) for column in draw_set.values.T], axis=1)


def _resampled_means(sub: FloatArray, n_resamples: int, rng: np.random.Generator) -> FloatArray:
    """(resamples x columns): each resample's mean of every column of ``sub``, n of n drawn."""
    n, k = sub.shape
    # Centred on each mean, the products stay small next to the spread of the means.
    centre = sub.mean(axis=0)
    centred = sub - centre
    distinct, tally = np.unique(centred, axis=0, return_counts=True)
    if distinct.shape[0] * _DISTINCT_RATIO <= n:
        # Examples with the same values need not be told apart: n draws over the distinct
        # rows, weighted by how many examples hold each, are the same distribution at
        # O(distinct) cost (a cluster score is 0 or 1).
        counts = rng.multinomial(n, tally / n, size=n_resamples).astype(np.float64)
        return counts @ distinct / n + centre
    means = np.empty((n_resamples, k))
    by_column = np.ascontiguousarray(centred.T)
    block = max(1, _BOOTSTRAP_BLOCK // n)
    for start in range(0, n_resamples, block):
        size = min(block, n_resamples - start)
        # n uniform draws per resample (rng.multinomial gives the same counts but costs about
        # six times as much at 80,000 examples). A column or two are cheapest read at the
        # drawn rows; more share the tally of the draws, one product.
        index = rng.integers(0, n, size=(size, n), dtype=np.int32 if n < 2**31 else np.int64)
        if k <= 2:
            for j, column in enumerate(by_column):
                means[start : start + size, j] = column[index].mean(axis=1) + centre[j]
            continue
        offsets = np.arange(size, dtype=np.int64)[:, None] * n
        drawn = np.bincount((index + offsets).ravel(), minlength=size * n).reshape(size, n)
        means[start : start + size] = drawn.astype(np.float64) @ centred / n + centre
    return means
