"""Comparing two runs: score differences with intervals, and a length-controlled win rate.

Pure numpy. The runs may grade different responses (different models), so each run is
resampled on its own: the interval of a difference comes from pairs of independent
bootstrap resamples, each side's mean clipped to [0, 1] as every HealthBench score is.
"""

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
N_RESAMPLES = 1000
# Two responses are of comparable length when they differ by at most this share of the longer.
LENGTH_TOLERANCE = 0.10


def _resampled_means(values: FloatArray, n_resamples: int, rng: np.random.Generator) -> FloatArray:
    index = rng.integers(0, values.size, size=(n_resamples, values.size))
    return np.clip(values[index].mean(axis=1), 0.0, 1.0)


def metric_differences(
    a: Mapping[str, FloatArray],
    b: Mapping[str, FloatArray],
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> dict[str, dict]:
    """For every metric both runs have: clipped means, B - A, and a bootstrap interval of B - A.

    Inputs are per-response metric columns (NaN where a response lacks the metric), as
    `scoring.score_grades` returns them.
    """
    rng = np.random.default_rng(seed)
    tail = (1.0 - confidence) / 2.0
    out: dict[str, dict] = {}
    for name in sorted(set(a) & set(b)):
        va, vb = a[name][~np.isnan(a[name])], b[name][~np.isnan(b[name])]
        if va.size == 0 or vb.size == 0:
            continue
        mean_a, mean_b = float(np.clip(va.mean(), 0, 1)), float(np.clip(vb.mean(), 0, 1))
        diffs = _resampled_means(vb, n_resamples, rng) - _resampled_means(va, n_resamples, rng)
        low, high = np.quantile(diffs, [tail, 1.0 - tail])
        out[name] = {
            "a": mean_a,
            "b": mean_b,
            "difference": mean_b - mean_a,
            "low": float(low),
            "high": float(high),
            "n_a": int(va.size),
            "n_b": int(vb.size),
            # The interval leaves out zero: B differs from A beyond resampling noise.
            "clear": bool(low > 0 or high < 0),
        }
    return out


def length_controlled_win_rate(
    *,
    conversation_a: npt.ArrayLike,
    length_a: npt.ArrayLike,
    score_a: npt.ArrayLike,
    conversation_b: npt.ArrayLike,
    length_b: npt.ArrayLike,
    score_b: npt.ArrayLike,
    tolerance: float = LENGTH_TOLERANCE,
) -> dict:
    """How often B's response beats A's on the same conversation, among pairs of similar length.

    Every (A response, B response) pair on one conversation is a comparison when both are
    scored and their lengths are within `tolerance` of the longer one; a win counts 1, a tie
    1/2. Pairs of very different length are left out so that verbosity cannot buy the win.
    """
    ca, la, sa = np.asarray(conversation_a), np.asarray(length_a, float), np.asarray(score_a, float)
    cb, lb, sb = np.asarray(conversation_b), np.asarray(length_b, float), np.asarray(score_b, float)
    keep_a, keep_b = ~np.isnan(sa), ~np.isnan(sb)
    ca, la, sa = ca[keep_a], la[keep_a], sa[keep_a]
    cb, lb, sb = cb[keep_b], lb[keep_b], sb[keep_b]
    order = np.argsort(cb, kind="stable")
    cb, lb, sb = cb[order], lb[order], sb[order]
    starts = np.searchsorted(cb, ca, side="left")
    ends = np.searchsorted(cb, ca, side="right")
    wins = ties = losses = all_pairs = 0
    for i in range(ca.size):
        if starts[i] == ends[i]:
            continue
        lengths, scores = lb[starts[i] : ends[i]], sb[starts[i] : ends[i]]
        all_pairs += lengths.size
        close = np.abs(lengths - la[i]) <= tolerance * np.maximum(lengths, la[i])
        wins += int((scores[close] > sa[i]).sum())
        ties += int((scores[close] == sa[i]).sum())
        losses += int((scores[close] < sa[i]).sum())
    counted = wins + ties + losses
    return {
        "win_rate": (wins + 0.5 * ties) / counted if counted else None,
        "wins": wins,
        "ties": ties,
        "losses": losses,
        "pairs_counted": counted,
        "pairs_all": all_pairs,
        "tolerance": tolerance,
    }
