import numpy as np
import pytest

from grading.reports.comparison import length_controlled_win_rate, metric_differences, shared_prompts


def test_differences_are_b_minus_a_of_clipped_means_on_shared_prompts_with_an_interval():
    a = {"overall_score": np.array([0.2, 0.4, np.nan, 0.9]), "theme:x": np.array([1.5, 1.5, 1.5, 1.5])}
    b = {"overall_score": np.array([0.6, 0.8, 0.7, 0.0]), "axis:y": np.array([0.1, 0.1, 0.1, 0.1])}
    # Prompt 9 is only in A, prompt 8 only in B: both are left out.
    out = metric_differences(a, [1, 2, 3, 9], b, [1, 2, 3, 8], seed=1)
    assert set(out) == {"overall_score"}
    row = out["overall_score"]
    # A has no score on prompt 3, so only prompts 1 and 2 pair up.
    assert (row["a"], row["b"]) == pytest.approx((0.3, 0.7))
    assert row["difference"] == pytest.approx(0.4)
    assert row["low"] <= 0.4 <= row["high"]
    assert row["clear"]
    assert (row["n_a"], row["n_b"], row["n_prompts"]) == (2, 2, 2)


def test_identical_runs_differ_by_exactly_zero_with_a_zero_width_interval():
    rng = np.random.default_rng(3)
    values = rng.uniform(-0.3, 1.0, 60)
    prompts = np.repeat(np.arange(20), 3)
    out = metric_differences({"m": values}, prompts, {"m": values.copy()}, prompts[::-1][::-1].copy(), seed=7)["m"]
    assert out["difference"] == 0.0
    assert out["low"] == 0.0
    assert out["high"] == 0.0
    assert not out["clear"]


def test_the_interval_holds_only_differences_some_resample_of_prompts_can_give():
    # Two shared prompts: every resample is {1, 1}, {1, 2} or {2, 2}; enumerate their differences.
    a, b = np.array([0.1, 0.3, 0.5]), np.array([0.2, 0.9, 0.6])
    pa, pb = np.array([1, 1, 2]), np.array([1, 2, 2])

    def diff(draw):
        ma = np.mean([v for p in draw for v, q in zip(a, pa, strict=True) if q == p])
        mb = np.mean([v for p in draw for v, q in zip(b, pb, strict=True) if q == p])
        return mb - ma

    possible = [diff(d) for d in ([1, 1], [1, 2], [2, 2])]
    row = metric_differences({"m": a}, pa, {"m": b}, pb, seed=0)["m"]
    assert row["difference"] == pytest.approx(possible[1])
    assert min(abs(row["low"] - p) for p in possible) < 1e-12
    assert min(abs(row["high"] - p) for p in possible) < 1e-12


def test_pairing_narrows_the_interval_when_prompts_differ_in_difficulty():
    rng = np.random.default_rng(0)
    difficulty = rng.uniform(0, 1, 200)
    a = np.clip(difficulty + rng.normal(0, 0.02, 200), 0, 1)
    b = np.clip(difficulty + 0.03 + rng.normal(0, 0.02, 200), 0, 1)
    prompts = np.arange(200)
    row = metric_differences({"m": a}, prompts, {"m": b}, prompts, seed=0)["m"]
    # Unpaired, prompt difficulty (std ~0.29) would swamp a 0.03 shift; paired, it cancels.
    assert row["high"] - row["low"] < 0.02
    assert row["clear"]


def test_runs_without_a_shared_prompt_have_nothing_to_compare():
    assert metric_differences({"m": np.array([0.5])}, [1], {"m": np.array([0.5])}, [2]) == {}
    assert shared_prompts([1, 1, 2, 3], [3, 4]) == {
        "shared": 1,
        "only_a": 2,
        "only_b": 1,
        "responses_left_out_a": 3,
        "responses_left_out_b": 1,
    }


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
    assert out["win_rate"] is None
    assert out["pairs_all"] == 1


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
