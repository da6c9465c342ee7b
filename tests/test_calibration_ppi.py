"""The calibrated score's arithmetic against ppi-python, the method's authors' own package.

``grading.calibration.ppi`` is written from the PPI++ paper; ``ppi_py`` (a dev dependency)
computes the same point estimate and interval on the same inputs, and the two must agree to
1e-9. The shown interval's t quantile is checked against scipy's values.
"""

import math
from statistics import NormalDist

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate  # type: ignore[import-untyped]

from grading.calibration.ppi import (
    MIN_SAMPLE,
    calibrate,
    calibrate_stratified,
    ppi_mean,
    t_quantile,
)

Z975 = NormalDist().inv_cdf(0.975)
# Student's t 0.975 quantiles, from scipy.stats.t.ppf (scipy is not a dependency of ours).
T975 = {
    10: 2.228138851986274,
    28: 2.0484071417952454,
    48: 2.010634757624232,
    100: 1.9839715185235518,
    148: 1.9761224936137445,
    149: 1.976013177689192,
    298: 1.9679565064968196,
    5000: 1.9604385517065073,
}


def _data(seed: int, n: int, n_run: int, correlation: float, bias: float):
    rng = np.random.default_rng(seed)
    physician_run = rng.beta(2.0, 2.5, n_run)
    noise = physician_run.std() * math.sqrt(1 / correlation**2 - 1)
    grader_run = np.clip(physician_run + bias + rng.normal(0, noise, n_run), 0, 1)
    sample = rng.choice(n_run, n, replace=False)
    return physician_run[sample], grader_run[sample], grader_run


CASES = [
    (1, 50, 5000, 0.8, 0.05),
    (2, 150, 5000, 0.3, -0.1),
    (3, 300, 1000, 0.95, 0.1),
    (4, 30, 200, 0.5, 0.0),
    (5, 2, 10, 0.9, 0.0),
]


@pytest.mark.parametrize(("seed", "n", "n_run", "correlation", "bias"), CASES)
def test_estimate_and_standard_error_equal_ppi_python(seed, n, n_run, correlation, bias):
    y, y_hat, y_run = _data(seed, n, n_run, correlation, bias)
    estimate, se, lam = ppi_mean(y, y_hat, y_run)
    theirs = float(np.ravel(ppi_mean_pointestimate(y, y_hat, y_run))[0])
    low, high = ppi_mean_ci(y, y_hat, y_run, alpha=0.05)
    assert estimate == pytest.approx(theirs, abs=1e-9)
    # ppi_mean_ci is centre +- z * se; both halves give the same se.
    assert float(high[0]) == pytest.approx(estimate + Z975 * se, abs=1e-9)
    assert float(low[0]) == pytest.approx(estimate - Z975 * se, abs=1e-9)
    assert 0.0 <= lam <= 1.0


@pytest.mark.parametrize("lam", [0.0, 0.37, 1.0])
def test_a_given_lam_matches_ppi_python(lam):
    y, y_hat, y_run = _data(11, 80, 2000, 0.7, 0.03)
    estimate, se, used = ppi_mean(y, y_hat, y_run, lam=lam)
    assert used == lam
    assert estimate == pytest.approx(float(np.ravel(ppi_mean_pointestimate(y, y_hat, y_run, lam=lam))[0]), abs=1e-9)
    low, high = ppi_mean_ci(y, y_hat, y_run, alpha=0.05, lam=lam)
    assert (float(high[0]) - float(low[0])) / (2 * Z975) == pytest.approx(se, abs=1e-9)


def test_lam_zero_is_the_physicians_alone_and_a_useless_grader_gets_lam_zero():
    rng = np.random.default_rng(3)
    y = rng.random(60)
    y_hat = 1.0 - y  # anti-correlated: power tuning clips lam to 0
    estimate, _, lam = ppi_mean(y, y_hat, rng.random(500))
    assert lam == 0.0
    assert estimate == pytest.approx(y.mean(), abs=1e-12)
    # A grader that gives every response the same score carries no information.
    assert ppi_mean(y, np.full(60, 0.5), np.full(500, 0.5))[2] == 0.0


@pytest.mark.parametrize("df", [10, 28, 48, 100, 298, 5000])
def test_t_quantile_matches_scipy(df):
    assert t_quantile(0.975, df) == pytest.approx(T975[df], abs=2e-5)


def test_report_values_and_the_interval_it_shows():
    y, y_hat, y_run = _data(7, 150, 5000, 0.8, -0.08)
    result = calibrate(y, y_hat, y_run)
    estimate, se, lam = ppi_mean(y, y_hat, y_run)
    assert (result.estimate, result.se, result.lam) == (estimate, se, lam)
    half = T975[148] * se
    assert result.interval.low == pytest.approx(estimate - half, abs=1e-6)
    assert result.interval.high == pytest.approx(estimate + half, abs=1e-6)
    assert result.grader_only == pytest.approx(y_run.mean())
    assert result.physician_only == pytest.approx(y.mean())
    assert result.bias == pytest.approx((y - y_hat).mean())
    # A grader correlated 0.8 is worth more labels than were drawn.
    assert result.effective_n is not None
    assert result.effective_n > result.n
    physician_half = T975[149] * y.std(ddof=1) / math.sqrt(150)
    assert result.physician_only_interval.high - result.physician_only_interval.low == pytest.approx(
        2 * physician_half, abs=1e-6
    )


def test_too_small_a_sample_says_so_instead_of_an_interval():
    y, y_hat, y_run = _data(8, MIN_SAMPLE - 1, 1000, 0.8, 0.0)
    result = calibrate(y, y_hat, y_run)
    assert result.estimate is not None
    assert result.interval is None
    assert f"at least {MIN_SAMPLE}" in result.no_interval_reason
    assert calibrate([0.5], [0.4], y_run).estimate is None


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one grader score per physician score"):
        calibrate([0.1, 0.2], [0.1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="finite"):
        calibrate([0.1, float("nan")], [0.1, 0.2], [0.1, 0.2])


def test_strata_are_weighted_by_their_share_of_the_run():
    a = _data(9, 40, 3000, 0.8, 0.05)
    b = _data(10, 40, 1000, 0.6, -0.05)
    combined = calibrate_stratified({"theme:a": a, "theme:b": b})
    first, second = ppi_mean(*a), ppi_mean(*b)
    assert combined.estimate == pytest.approx(0.75 * first[0] + 0.25 * second[0], abs=1e-12)
    assert combined.se == pytest.approx(math.hypot(0.75 * first[1], 0.25 * second[1]), abs=1e-12)
    assert combined.n == 80
    assert combined.n_run == 4000
    short = calibrate_stratified({"theme:a": a, "theme:c": ([0.5], [0.5], [0.5, 0.6])})
    assert short.estimate is None
    assert "theme:c" in short.no_interval_reason
