"""The physician-calibrated score: prediction-powered inference (PPI++) for a run's mean score.

Plain numpy, no Django. A run gives the grader's score for every response; a random
calibration sample of n of them also gets the physicians' score. PPI++ (Angelopoulos, Duchi,
Zrnic 2023) corrects the grader's mean over the whole run with the physicians' sample:

    estimate = mean(lam * grader over the run) + mean(physician - lam * grader over the sample)

which is unbiased for the physicians' mean whatever the grader's errors are, for any fixed lam;
lam is the power-tuning weight that minimises the variance, estimated from the data and clipped
to [0, 1] (lam = 0 is the physicians alone, lam = 1 is plain PPI). The point estimate, lam and the
standard error are those of ``ppi_py.ppi_mean_pointestimate`` / ``ppi_mean_ci`` on the same
inputs (``tests/test_calibration_ppi.py`` holds them to 1e-9).

One deliberate difference: the interval shown uses Student's t with n - 2 degrees of freedom
instead of the normal quantile. lam and the rectifier's spread are both estimated from the same
n labels; with the normal quantile the 95% interval covered only about 93% at n = 50 in the
simulation of ``bench/calibration_bench.py``, with t(n - 2) it stays within [0.935, 0.965] at
every n there. Below ``MIN_SAMPLE`` responses no interval is given at all: the normal
approximation behind it is not worth trusting, and the report says so instead.

Stratified samples (by theme) are combined with the run's own theme shares as weights: each
stratum is estimated alone and the estimate is the weighted sum, its variance the weighted sum
of variances.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

CONFIDENCE = 0.95
# Below this many physician-scored responses no interval is shown (issue 31: "say n < 30").
MIN_SAMPLE = 30


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class Calibration:
    """Everything the report shows about one calibrated mean (a run, or one theme of it)."""

    n: int  # physician-scored responses in the sample
    n_run: int  # grader-scored responses in the run
    estimate: float | None  # the calibrated (physician-scale) mean
    se: float | None
    lam: float | None
    interval: Interval | None  # None when n < MIN_SAMPLE (see ``no_interval_reason``)
    no_interval_reason: str
    grader_only: float  # mean grader score over the run
    grader_only_interval: Interval | None  # classical, ignoring the grader's bias
    physician_only: float | None  # mean physician score on the sample
    physician_only_interval: Interval | None  # classical (t, n - 1), on the sample alone
    bias: float | None  # mean(physician - grader) on the sample
    effective_n: float | None  # physician-only labels the calibrated interval is worth

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _as_vector(values: npt.ArrayLike, what: str) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} holds a value that is not a finite number")
    return array


def power_tuning(physician: FloatArray, grader_sample: FloatArray, grader_run: FloatArray) -> float:
    """PPI++'s variance-minimising lam for a mean, clipped to [0, 1], as ppi_py computes it.

    ppi_py evaluates the gradients at the plain-PPI (lam = 1) estimate; for a mean the centred
    covariance does not depend on that point, but the spread of the grader's scores is taken
    over the sample and the run together.
    """
    n, n_run = len(physician), len(grader_run)
    centred_y = physician - physician.mean()
    centred_hat = grader_sample - grader_sample.mean()
    covariance = 2.0 * float(centred_y @ centred_hat) / n
    pooled = np.concatenate([grader_sample, grader_run])
    variance = float(np.var(pooled, ddof=1))
    if variance == 0.0:
        return 0.0  # a constant grader carries no information
    lam = covariance / (2.0 * (1.0 + n / n_run) * variance)
    return min(max(lam, 0.0), 1.0)


def ppi_mean(
    physician: npt.ArrayLike,
    grader_sample: npt.ArrayLike,
    grader_run: npt.ArrayLike,
    lam: float | None = None,
) -> tuple[float, float, float]:
    """(estimate, standard error, lam) of the PPI++ mean; lam from the data unless given.

    ``grader_run`` is the grader's score of every response the estimate speaks for (ppi_py's
    ``Yhat_unlabeled``); ``physician`` and ``grader_sample`` are the sample's, pairwise.
    """
    y = _as_vector(physician, "physician scores")
    y_hat = _as_vector(grader_sample, "grader scores of the sample")
    y_run = _as_vector(grader_run, "grader scores of the run")
    if len(y) != len(y_hat):
        raise ValueError("the sample needs one grader score per physician score")
    if len(y) < 2 or len(y_run) < 2:
        raise ValueError("the sample and the run need at least two scores each")
    if lam is None:
        lam = power_tuning(y, y_hat, y_run)
    estimate = float((lam * y_run).mean() + (y - lam * y_hat).mean())
    # Population standard deviations (ddof 0), as ppi_py's ppi_mean_ci takes them.
    imputed = float((lam * y_run).std()) / math.sqrt(len(y_run))
    rectifier = float((y - lam * y_hat).std()) / math.sqrt(len(y))
    return estimate, math.hypot(imputed, rectifier), float(lam)


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile by the Cornish-Fisher expansion (Abramowitz and Stegun 26.7.5).

    Accurate to about 1e-5 from 10 degrees of freedom up (the test checks it against scipy),
    which is all it is used for: intervals are shown from ``MIN_SAMPLE`` responses on. scipy is
    not a runtime dependency for one quantile.
    """
    if df < 1:
        raise ValueError("degrees of freedom must be at least 1")
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _t_interval(centre: float, se: float, df: int) -> Interval:
    half = t_quantile(0.5 + CONFIDENCE / 2, df) * se
    return Interval(centre - half, centre + half)


def _classical(values: FloatArray) -> tuple[float, float]:
    """Mean and its standard error (sample standard deviation, ddof 1)."""
    return float(values.mean()), float(values.std(ddof=1)) / math.sqrt(len(values))


def calibrate(physician: npt.ArrayLike, grader_sample: npt.ArrayLike, grader_run: npt.ArrayLike) -> Calibration:
    """The calibrated mean of one population with its comparisons (see :class:`Calibration`)."""
    y = _as_vector(physician, "physician scores")
    y_hat = _as_vector(grader_sample, "grader scores of the sample")
    y_run = _as_vector(grader_run, "grader scores of the run")
    if len(y) != len(y_hat):
        raise ValueError("the sample needs one grader score per physician score")
    n = len(y)
    grader_mean, grader_se = _classical(y_run) if len(y_run) >= 2 else (float(y_run.mean()), 0.0)
    grader_interval = _t_interval(grader_mean, grader_se, max(len(y_run) - 1, 1))
    if n < 2 or len(y_run) < 2:
        return Calibration(
            n=n,
            n_run=len(y_run),
            estimate=None,
            se=None,
            lam=None,
            interval=None,
            no_interval_reason=f"{n} physician-scored responses: at least 2 are needed",
            grader_only=grader_mean,
            grader_only_interval=grader_interval if len(y_run) >= 2 else None,
            physician_only=float(y.mean()) if n else None,
            physician_only_interval=None,
            bias=float((y - y_hat).mean()) if n else None,
            effective_n=None,
        )
    estimate, se, lam = ppi_mean(y, y_hat, y_run)
    physician_mean, physician_se = _classical(y)
    enough = n >= MIN_SAMPLE
    variance = float(y.var(ddof=1))
    return Calibration(
        n=n,
        n_run=len(y_run),
        estimate=estimate,
        se=se,
        lam=lam,
        interval=_t_interval(estimate, se, n - 2) if enough else None,
        no_interval_reason="" if enough else f"{n} physician-scored responses: an interval needs at least {MIN_SAMPLE}",
        grader_only=grader_mean,
        grader_only_interval=grader_interval,
        physician_only=physician_mean,
        physician_only_interval=_t_interval(physician_mean, physician_se, n - 1) if enough else None,
        bias=float((y - y_hat).mean()),
        # How many physician-only labels would give the same standard error.
        effective_n=variance / se**2 if se > 0 else None,
    )


def calibrate_stratified(
    strata: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
) -> Calibration:
    """Combine per-stratum calibrations, weighting each by its share of the run.

    ``strata`` maps a stratum (a theme) to (physician, grader_sample, grader_run) of that
    stratum. A stratum with fewer than two sampled responses cannot be estimated: the combined
    estimate is then withheld, with the reason.
    """
    if not strata:
        raise ValueError("no strata")
    total = sum(len(run) for _, _, run in strata.values())
    parts = {name: calibrate(*values) for name, values in strata.items()}
    physician = np.concatenate([np.asarray(v[0], dtype=np.float64) for v in strata.values()])
    grader_sample = np.concatenate([np.asarray(v[1], dtype=np.float64) for v in strata.values()])
    grader_run = np.concatenate([np.asarray(v[2], dtype=np.float64) for v in strata.values()])
    pooled = calibrate(physician, grader_sample, grader_run)
    short = sorted(name for name, part in parts.items() if part.estimate is None)
    if short:
        return _withheld(pooled, f"too few sampled responses in {', '.join(short)}")
    weighted = [(len(strata[name][2]) / total, part.estimate, part.se) for name, part in parts.items()]
    estimate = sum(w * e for w, e, _ in weighted if e is not None)
    se = math.sqrt(sum((w * s) ** 2 for w, _, s in weighted if s is not None))
    # Degrees of freedom: the sample's, less two per stratum (lam and the centre of each).
    df = max(pooled.n - 2 * len(parts), 1)
    enough = pooled.n >= MIN_SAMPLE
    variance = float(physician.var(ddof=1))
    return Calibration(
        n=pooled.n,
        n_run=pooled.n_run,
        estimate=estimate,
        se=se,
        lam=None,  # one per stratum
        interval=_t_interval(estimate, se, df) if enough else None,
        no_interval_reason=pooled.no_interval_reason,
        grader_only=pooled.grader_only,
        grader_only_interval=pooled.grader_only_interval,
        physician_only=pooled.physician_only,
        physician_only_interval=pooled.physician_only_interval,
        bias=pooled.bias,
        effective_n=variance / se**2 if se > 0 else None,
    )


def _withheld(pooled: Calibration, reason: str) -> Calibration:
    return replace(pooled, estimate=None, se=None, lam=None, interval=None, effective_n=None, no_interval_reason=reason)
