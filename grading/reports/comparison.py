"""Comparing two runs: paired score differences with intervals, and a length-controlled win rate.

Pure numpy. Two runs over the same prompts are compared on their shared prompts only, with a
paired bootstrap: each resample draws shared prompts with replacement and takes both runs'
responses to each drawn prompt, so prompt difficulty cancels out of the difference. Each
side's mean is clipped to [0, 1], as every HealthBench score is. Identical runs give a
difference of exactly 0 in every resample, hence a zero-width interval; prompts only one run
has are left out and counted.
"""

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
N_RESAMPLES = 1000
# Two responses are of comparable length when they differ by at most this share of the longer.
LENGTH_TOLERANCE = 0.10


def shared_prompts(prompt_a: npt.ArrayLike, prompt_b: npt.ArrayLike) -> dict[str, int]:
    """How many prompts both runs have, how many only one has, and the responses left out."""
    pa, pb = np.asarray(prompt_a), np.asarray(prompt_b)
    shared = np.intersect1d(pa, pb)
    return {
        "shared": int(shared.size),
        "only_a": int(np.setdiff1d(pa, shared).size),
        "only_b": int(np.setdiff1d(pb, shared).size),
        "responses_left_out_a": int((~np.isin(pa, shared)).sum()),
        "responses_left_out_b": int((~np.isin(pb, shared)).sum()),
    }


def _per_prompt(values: FloatArray, prompt: npt.NDArray, shared: npt.NDArray) -> tuple[FloatArray, FloatArray]:
    # Floats on both sides: the bootstrap divides weighted sums by weighted counts.
    """Sum and count of the non-NaN values of each shared prompt (zeros where it has none)."""
    at = np.searchsorted(shared, prompt)
    keep = ~np.isnan(values) & (at < shared.size)
    keep[keep] &= shared[at[keep]] == prompt[keep]
    sums = np.bincount(at[keep], weights=values[keep], minlength=shared.size).astype(np.float64)
    counts = np.bincount(at[keep], minlength=shared.size).astype(np.float64)
    return sums, counts


def metric_differences(
    a: Mapping[str, FloatArray],
    prompt_a: npt.ArrayLike,
    b: Mapping[str, FloatArray],
    prompt_b: npt.ArrayLike,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> dict[str, dict]:
    """For every metric both runs have on their shared prompts: clipped means, B - A, and a
    paired bootstrap interval of B - A.

    Inputs are per-response metric columns (NaN where a response lacks the metric), as
    `scoring.score_grades` returns them, and the prompt of each response. A metric counts
    only on shared prompts where both runs have it. Resamples in which one side drew no
    response with the metric are dropped (``n_defined`` says how many remain).
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must lie strictly between 0 and 1")
    pa, pb = np.asarray(prompt_a), np.asarray(prompt_b)
    shared = np.intersect1d(pa, pb)
    out: dict[str, dict] = {}
    if shared.size == 0:
        return out
    rng = np.random.default_rng(seed)
    # One draw of prompts serves every metric, so the metrics of one resample stay consistent.
    weights = rng.multinomial(shared.size, np.full(shared.size, 1.0 / shared.size), size=n_resamples).astype(np.float64)
    tail = (1.0 - confidence) / 2.0
    for name in sorted(set(a) & set(b)):
        sum_a, n_a = _per_prompt(np.asarray(a[name], dtype=np.float64), pa, shared)
        sum_b, n_b = _per_prompt(np.asarray(b[name], dtype=np.float64), pb, shared)
        both = (n_a > 0) & (n_b > 0)
        if not both.any():
            continue
        sum_a, n_a, sum_b, n_b = (np.where(both, x, 0.0) for x in (sum_a, n_a, sum_b, n_b))
        mean_a = float(np.clip(sum_a.sum() / n_a.sum(), 0, 1))
        mean_b = float(np.clip(sum_b.sum() / n_b.sum(), 0, 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            boot_a = np.clip((weights @ sum_a) / (weights @ n_a), 0, 1)
            boot_b = np.clip((weights @ sum_b) / (weights @ n_b), 0, 1)
        diffs = boot_b - boot_a
        diffs = diffs[~np.isnan(diffs)]
        low, high = (float(x) for x in np.quantile(diffs, [tail, 1.0 - tail])) if diffs.size else (None, None)
        out[name] = {
            "a": mean_a,
            "b": mean_b,
            "difference": mean_b - mean_a,
            "low": low,
            "high": high,
            "n_a": int(n_a.sum()),
            "n_b": int(n_b.sum()),
            "n_prompts": int(both.sum()),
            "n_defined": int(diffs.size),
            "n_resamples": n_resamples,
            # The interval leaves out zero: B differs from A beyond resampling noise.
            "clear": bool(low is not None and high is not None and (low > 0 or high < 0)),
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
