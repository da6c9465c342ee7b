import numpy as np
import pytest

from grading.reports.comparison import length_controlled_win_rate, metric_differences


def test_differences_are_b_minus_a_of_clipped_means_with_an_interval():
    a = {"overall_score": np.array([0.2, 0.4, np.nan]), "theme:x": np.array([1.5, 1.5, 1.5])}
    b = {"overall_score": np.array([0.6, 0.8, 0.7]), "axis:y": np.array([0.1])}
    out = metric_differences(a, b, seed=1)
    assert set(out) == {"overall_score"}
    row = out["overall_score"]
    assert (row["a"], row["b"]) == pytest.approx((0.3, 0.7))
    assert row["difference"] == pytest.approx(0.4)
    assert row["low"] <= 0.4 <= row["high"] and row["clear"] and (row["n_a"], row["n_b"]) == (2, 3)


def test_the_interval_is_reproducible_with_a_seed_and_covers_zero_for_equal_runs():
    values = np.linspace(0, 1, 50)
    first = metric_differences({"m": values}, {"m": values.copy()}, seed=7)["m"]
    again = metric_differences({"m": values}, {"m": values.copy()}, seed=7)["m"]
    assert first == again
    assert first["low"] < 0 < first["high"] and not first["clear"]


def test_win_rate_counts_only_pairs_of_similar_length():
    out = length_controlled_win_rate(
        conversation_a=[1, 1, 2],
        length_a=[100, 300, 200],
        score_a=[0.5, 0.9, 0.4],
        conversation_b=[1, 2, 2, 3],
        length_b=[105, 190, 400, 100],
        score_b=[0.7, 0.4, 1.0, 0.2],
    )
    # conv 1: (100 vs 105) B wins; (300 vs 105) too different. conv 2: (200 vs 190) tie; (200 vs 400) left out.
    assert (out["wins"], out["ties"], out["losses"]) == (1, 1, 0)
    assert (out["pairs_counted"], out["pairs_all"]) == (2, 4)
    assert out["win_rate"] == pytest.approx(0.75)


def test_win_rate_is_undefined_without_comparable_pairs():
    out = length_controlled_win_rate(
        conversation_a=[1], length_a=[10], score_a=[0.5], conversation_b=[1], length_b=[100], score_b=[0.1]
    )
    assert out["win_rate"] is None and out["pairs_all"] == 1


def test_unscored_responses_are_left_out_of_the_win_rate():
    out = length_controlled_win_rate(
        conversation_a=[1, 1],
        length_a=[10, 10],
        score_a=[np.nan, 0.2],
        conversation_b=[1],
        length_b=[10],
        score_b=[0.1],
    )
    assert (out["losses"], out["pairs_counted"]) == (1, 1)
