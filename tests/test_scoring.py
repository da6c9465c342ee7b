"""Scoring: hand-checked cases and the public reference's own numbers. No database.

The fixtures in ``fixtures/scoring/`` hold generated rubrics and grades together with what
openai/simple-evals computed from them (per-response metrics, run metrics, bootstrap stds, the
last drawn after seeding numpy with the file's ``reference_seed``). scripts/golden_files.py
recomputes them with the reference's own functions (``--write`` regenerates the files), and
tests/test_golden_files.py checks that the files are what the reference computes.
"""

import itertools
import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grading.reports import bootstrap, scoring
from grading.reports.scoring import MET, MISSING, NOT_MET

FIXTURES = Path(__file__).parent / "fixtures" / "scoring"
DATASETS = ["mixed", "mostly_negative", "bootstrap"]


@cache
def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def per_response_metrics(data: dict[str, Any]) -> list[dict[str, float]]:
    out = []
    for response in data["responses"]:
        conversation = data["conversations"][response["conversation"]]
        criteria = conversation["criteria"]
        out.append(
            scoring.example_metrics(
                [c["points"] for c in criteria],
                response["met"],
                [c["tags"] for c in criteria],
                conversation["example_tags"],
            )
        )
    return out


def grade_arrays(data: dict[str, Any]) -> dict[str, Any]:
    """The fixture as the flat arrays a selector hands to score_grades."""
    conversations = data["conversations"]
    first = np.cumsum([0] + [len(c["criteria"]) for c in conversations])
    rows = [
        (r, first[response["conversation"]] + j, criterion["points"], MET if met else NOT_MET)
        for r, response in enumerate(data["responses"])
        for j, (criterion, met) in enumerate(
            zip(conversations[response["conversation"]]["criteria"], response["met"], strict=True)
        )
    ]
    resp, crit, points, met = (np.array(column) for column in zip(*rows, strict=True))
    return {
        "grade_response": resp,
        "grade_criterion": crit,
        "grade_points": points,
        "grade_met": met,
        "response_conversation": np.array([r["conversation"] for r in data["responses"]]),
        "criterion_tags": scoring.encode_tags([c["tags"] for conv in conversations for c in conv["criteria"]]),
        "conversation_tags": scoring.encode_tags([conv["example_tags"] for conv in conversations]),
    }


def tags(**columns: list[list[str]]) -> dict[str, Any]:
    return {name: scoring.encode_tags(lists) for name, lists in columns.items()}


# --- one response -------------------------------------------------------------------------


def test_example_score_is_met_points_over_positive_points():
    assert scoring.example_score([5, 3, -2], [True, False, True]) == pytest.approx(3 / 8)


def test_example_score_can_be_negative():
    assert scoring.example_score([2, -10], [False, True]) == pytest.approx(-5.0)


def test_example_score_is_none_without_positive_points():
    assert scoring.example_score([-3, -1], [True, False]) is None


def test_example_tags_get_the_overall_score():
    metrics = scoring.example_metrics([4, 4], [True, False], [["axis:accuracy"], ["axis:accuracy"]], ["theme:hedging"])
    assert metrics == {"overall_score": 0.5, "theme:hedging": 0.5, "axis:accuracy": 0.5}


def test_rubric_tag_score_uses_only_its_own_criteria():
    metrics = scoring.example_metrics(
        [6, 2, -4],
        [True, False, True],
        [["axis:accuracy"], ["axis:completeness"], ["axis:accuracy"]],
        [],
    )
    assert metrics["axis:accuracy"] == pytest.approx((6 - 4) / 6)
    assert metrics["axis:completeness"] == 0.0
    assert metrics["overall_score"] == pytest.approx((6 - 4) / 8)


def test_rubric_tag_with_only_negative_criteria_gets_no_score():
    metrics = scoring.example_metrics([5, -3], [True, True], [["axis:accuracy"], ["axis:completeness"]], [])
    assert "axis:completeness" not in metrics
    assert metrics["axis:accuracy"] == 1.0


def test_rubric_tag_wins_over_an_example_tag_of_the_same_name():
    metrics = scoring.example_metrics([5, 5], [True, False], [["x"], []], ["x"])
    assert metrics["x"] == 1.0
    assert metrics["overall_score"] == 0.5


def test_a_rubric_without_positive_points_cannot_be_scored():
    with pytest.raises(ValueError, match="no criterion with positive points"):
        scoring.example_metrics([-5], [False], [[]], [])


def test_repeated_tags_are_rejected():
    with pytest.raises(ValueError, match="repeat a tag"):
        scoring.example_metrics([5], [True], [["axis:accuracy", "axis:accuracy"]], [])
    with pytest.raises(ValueError, match="repeat a tag"):
        scoring.encode_tags([["theme:hedging", "theme:hedging"]])


@pytest.mark.parametrize("name", ["mixed", "mostly_negative"])
def test_per_response_metrics_equal_the_reference(name):
    data = load(name)
    for ours, reference in zip(per_response_metrics(data), data["reference_response_metrics"], strict=True):
        assert ours.keys() == reference.keys()
        for key, value in reference.items():
            assert ours[key] == pytest.approx(value, abs=1e-12)


# --- run metrics --------------------------------------------------------------------------


def test_mean_is_clipped_after_averaging_not_per_response():
    # Clipping each response first would give mean(0, 1, 0.5) = 0.5.
    assert scoring.clipped_mean([-1.0, 1.0, 0.5]) == pytest.approx(1 / 6)
    assert scoring.clipped_mean([-1.0, 0.5]) == 0.0


def test_run_metrics_clip_the_mean_of_negative_tag_scores():
    per_response = [{"overall_score": -0.5}, {"overall_score": 0.2}]
    metrics = scoring.aggregate(per_response, seed=0)
    assert metrics["overall_score"] == 0.0
    assert metrics["overall_score:n_samples"] == 2


@pytest.mark.parametrize("name", DATASETS)
def test_run_metrics_equal_the_reference(name):
    data = load(name)
    reference = data["reference_metrics"]
    ours = scoring.reference_summary(scoring.aggregate(per_response_metrics(data), seed=0))
    # The reference's metrics keep score:n_samples and score:bootstrap_std; score is apart.
    assert ours.keys() - {"score"} == reference.keys()
    assert ours["score"] == pytest.approx(data["reference_score"], abs=1e-9)
    for key, value in reference.items():
        if key.endswith(":n_samples"):
            assert ours[key] == value, key
        elif not key.endswith(":bootstrap_std"):
            assert ours[key] == pytest.approx(value, abs=1e-9), key


def test_aggregate_leaves_out_the_duplicate_score_keys():
    metrics = scoring.aggregate(per_response_metrics(load("mixed")), seed=0)
    assert not any(key.startswith("score") for key in metrics)


def test_bootstrap_std_is_close_to_the_reference():
    # 1000 resamples estimate a std to about 2%; two independent estimates stay well in 15%.
    data = load("bootstrap")
    ours = scoring.aggregate(per_response_metrics(data), seed=0)
    for key, value in data["reference_metrics"].items():
        if key.endswith(":bootstrap_std") and not key.startswith("score"):
            assert ours[key] == pytest.approx(value, rel=0.15), key


def test_bootstrap_std_of_one_value_is_zero():
    assert scoring.bootstrap_std([0.3], seed=0) == pytest.approx(0.0, abs=1e-12)


def test_bootstrap_is_reproducible_with_a_seed():
    values = np.random.default_rng(1).normal(0.4, 0.3, size=500)
    assert scoring.bootstrap_std(values, seed=7) == scoring.bootstrap_std(values, seed=7)
    assert scoring.bootstrap_std(values, seed=7) != scoring.bootstrap_std(values, seed=8)
    first = scoring.bootstrap_std(values, seed=np.random.default_rng(3))
    assert first == scoring.bootstrap_std(values, seed=np.random.default_rng(3))


def test_bootstrap_std_matches_the_standard_error_of_the_mean():
    values = np.random.default_rng(2).normal(0.5, 0.2, size=2000)
    expected = values.std() / math.sqrt(values.size)
    assert scoring.bootstrap_std(values, seed=0) == pytest.approx(expected, rel=0.1)


def test_bootstrap_by_distinct_values_matches_resampling_indices(monkeypatch):
    values = np.repeat([0.0, 0.25, 1.0], [500, 300, 200])
    by_value = scoring.bootstrap_std(values, n_resamples=4000, seed=0)
    monkeypatch.setattr(bootstrap, "_DISTINCT_RATIO", 10**9)
    by_index = scoring.bootstrap_std(values, n_resamples=4000, seed=0)
    assert by_value == pytest.approx(by_index, rel=0.05)
    assert by_value == pytest.approx(values.std() / math.sqrt(values.size), rel=0.05)


def test_a_metric_keeps_its_bootstrap_std_when_other_metrics_change():
    values = [{"overall_score": v, "theme:x": v} for v in np.linspace(0, 1, 50)]
    alone = scoring.aggregate([{"overall_score": v["overall_score"]} for v in values], seed=4)
    together = scoring.aggregate(values, seed=4)
    assert alone["overall_score:bootstrap_std"] == together["overall_score:bootstrap_std"]


# --- the bulk path ------------------------------------------------------------------------


@pytest.mark.parametrize("name", DATASETS)
def test_bulk_path_gives_the_same_metrics_as_one_response_at_a_time(name):
    data = load(name)
    arrays = grade_arrays(data)
    order = np.random.default_rng(0).permutation(arrays["grade_met"].size)
    for key in ("grade_response", "grade_criterion", "grade_points", "grade_met"):
        arrays[key] = arrays[key][order]  # grades come in any order
    scores = scoring.score_grades(**arrays)
    per_response = per_response_metrics(data)
    assert scores["n_scored"] == len(per_response)
    for r, metrics in enumerate(per_response):
        present = {name for name, column in scores["metrics"].items() if not np.isnan(column[r])}
        assert present == metrics.keys()
        for key, value in metrics.items():
            assert scores["metrics"][key][r] == pytest.approx(value, abs=1e-12)
    # One random stream per metric name: both paths draw the same resamples.
    expected = scoring.aggregate(per_response, seed=5)
    assert scoring.aggregate_columns(scores["metrics"], seed=5) == pytest.approx(expected, abs=1e-12)


def test_partially_graded_responses_are_left_out_and_counted():
    data = load("mixed")
    arrays = grade_arrays(data)
    met = arrays["grade_met"].copy()
    gaps = {0: 1, 9: 2}  # response -> number of failed grades
    for response, count in gaps.items():
        met[np.flatnonzero(arrays["grade_response"] == response)[:count]] = MISSING
    scores = scoring.score_grades(**{**arrays, "grade_met": met})
    assert scores["n_incomplete"] == 2
    assert scores["n_missing_grades"] == 3
    assert scores["n_scored"] == len(data["responses"]) - 2
    for column in scores["metrics"].values():
        assert np.isnan(column[list(gaps)]).all()
    complete = [m for r, m in enumerate(per_response_metrics(data)) if r not in gaps]
    expected = scoring.aggregate(complete, seed=0)
    ours = scoring.aggregate_columns(scores["metrics"], seed=0)
    assert ours.keys() == expected.keys()
    for key, value in expected.items():
        if not key.endswith(":bootstrap_std"):
            assert ours[key] == pytest.approx(value, abs=1e-12), key


def test_responses_with_fewer_grades_than_expected_are_incomplete():
    scores = scoring.score_grades(
        grade_response=[0, 0, 1],
        grade_criterion=[0, 1, 0],
        grade_points=[5, 5, 5],
        grade_met=[MET, NOT_MET, MET],
        response_conversation=[0, 0],
        expected_grades=[2, 2],
        **tags(criterion_tags=[["axis:accuracy"], ["axis:accuracy"]], conversation_tags=[["theme:hedging"]]),
    )
    assert scores["n_incomplete"] == 1
    assert scores["n_missing_grades"] == 0
    assert scores["metrics"]["overall_score"][0] == 0.5
    assert np.isnan(scores["metrics"]["overall_score"][1])


def test_more_grades_than_expected_is_an_error():
    with pytest.raises(ValueError, match="more grades than expected"):
        scoring.score_grades(
            grade_response=[0, 0],
            grade_criterion=[0, 0],
            grade_points=[5, 5],
            grade_met=[MET, MET],
            response_conversation=[0],
            expected_grades=[1],
            **tags(criterion_tags=[[]], conversation_tags=[[]]),
        )


def test_a_response_without_positive_points_is_unscorable():
    scores = scoring.score_grades(
        grade_response=[0, 1],
        grade_criterion=[0, 1],
        grade_points=[5, -5],
        grade_met=[MET, MET],
        response_conversation=[0, 1],
        **tags(criterion_tags=[[], []], conversation_tags=[["theme:a"], ["theme:b"]]),
    )
    assert (scores["n_scored"], scores["n_unscorable"], scores["n_incomplete"]) == (1, 1, 0)
    assert "theme:b" not in scores["metrics"]


def test_bulk_rubric_tag_with_only_negative_criteria_gets_no_score():
    scores = scoring.score_grades(
        grade_response=[0, 0],
        grade_criterion=[0, 1],
        grade_points=[5, -3],
        grade_met=[MET, MET],
        response_conversation=[0],
        **tags(criterion_tags=[["axis:accuracy"], ["axis:completeness"]], conversation_tags=[[]]),
    )
    assert scores["metrics"]["overall_score"][0] == pytest.approx(2 / 5)
    assert "axis:completeness" not in scores["metrics"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"grade_met": [2]}, "MET, NOT_MET or MISSING"),
        ({"grade_response": [1]}, "out of range"),
        ({"grade_criterion": [-1]}, "out of range"),
        ({"response_conversation": [3]}, "out of range"),
    ],
)
def test_bad_grade_arrays_are_rejected(change, message):
    arrays: dict[str, Any] = {
        "grade_response": [0],
        "grade_criterion": [0],
        "grade_points": [5],
        "grade_met": [MET],
        "response_conversation": [0],
        **tags(criterion_tags=[[]], conversation_tags=[[]]),
    }
    scoring.score_grades(**arrays)
    with pytest.raises(ValueError, match=message):
        scoring.score_grades(**{**arrays, **change})


# --- worst-at-k ---------------------------------------------------------------------------


def brute_force_worst_at_k(groups: list[list[float]], k: int) -> float:
    per_group = [np.mean([min(subset) for subset in itertools.combinations(g, k)]) for g in groups]
    return float(np.mean(per_group))


@pytest.mark.parametrize("n", range(1, 13))
def test_min_weights_are_the_order_statistic_probabilities(n):
    weights = scoring.min_weights(n)
    expected = [[math.comb(n - 1 - i, k - 1) / math.comb(n, k) for i in range(n)] for k in range(1, n + 1)]
    np.testing.assert_allclose(weights, expected, rtol=1e-12, atol=1e-15)


def test_min_weights_stay_finite_for_many_samples():
    weights = scoring.min_weights(3000)
    assert np.isfinite(weights).all()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-9)


def test_worst_at_k_matches_brute_force_enumeration():
    rng = np.random.default_rng(11)
    # Equal sizes and ties (scores on a coarse grid), negatives included.
    groups = [list(rng.choice([-0.5, 0.0, 0.25, 0.5, 1.0], size=6)) for _ in range(5)]
    groups += [list(rng.uniform(-0.3, 1, size=6)) for _ in range(5)]
    scores = [s for g in groups for s in g]
    conversation = [i for i, g in enumerate(groups) for _ in g]
    result = scoring.worst_at_k(scores, conversation, clip=False)
    assert list(result) == [1, 2, 3, 4, 5, 6]
    for k, value in result.items():
        assert value == pytest.approx(brute_force_worst_at_k(groups, k), abs=1e-12)


def test_worst_at_k_stops_at_the_smallest_sample_count():
    rng = np.random.default_rng(12)
    groups = [list(rng.uniform(0, 1, size=n)) for n in (3, 5, 7, 4)]
    result = scoring.worst_at_k([s for g in groups for s in g], [i for i, g in enumerate(groups) for _ in g])
    assert list(result) == [1, 2, 3]
    for k, value in result.items():
        assert value == pytest.approx(brute_force_worst_at_k(groups, k), abs=1e-12)


def test_worst_at_k_drops_unscored_responses():
    result = scoring.worst_at_k([0.2, np.nan, 0.8, 0.4, 0.6], [0, 0, 0, 1, 1])
    # Conversation 0 keeps 0.2 and 0.8, so both conversations have two samples.
    assert result == pytest.approx({1: 0.5, 2: (0.2 + 0.4) / 2})


def test_worst_at_k_never_rises_with_k():
    rng = np.random.default_rng(13)
    result = scoring.worst_at_k(rng.uniform(0, 1, 400), np.repeat(np.arange(25), 16))
    assert len(result) == 16
    assert all(a >= b for a, b in itertools.pairwise(result.values()))


def test_worst_at_1_is_the_overall_score_when_sample_counts_are_equal():
    data = load("bootstrap")
    scores = scoring.score_grades(**grade_arrays(data))
    overall = scores["metrics"]["overall_score"]
    result = scoring.worst_at_k(overall, grade_arrays(data)["response_conversation"])
    assert result[1] == pytest.approx(scoring.clipped_mean(overall), abs=1e-12)


def test_worst_at_k_clips_negative_means():
    assert scoring.worst_at_k([-0.5, 0.2], [0, 0]) == {1: 0.0, 2: 0.0}
    assert scoring.worst_at_k([np.nan], [0]) == {}


# --- error rates --------------------------------------------------------------------------


def test_error_rate_counts_unmet_positive_and_met_negative_criteria():
    criterion_tags = scoring.encode_tags([["level:cluster", "cluster:refer"], ["level:cluster", "cluster:harm"], []])
    rates = scoring.criterion_error_rates(
        grade_criterion=[0, 0, 0, 0, 1, 1, 1, 2],
        grade_points=[5, 5, 5, 5, -5, -5, -5, 5],
        grade_met=[MET, NOT_MET, NOT_MET, MISSING, MET, NOT_MET, NOT_MET, NOT_MET],
        criterion_tags=criterion_tags,
    )
    assert rates == {
        "cluster:refer": {"error_rate": pytest.approx(2 / 3), "n_errors": 2, "n_graded": 3, "n_missing": 1},
        "cluster:harm": {"error_rate": pytest.approx(1 / 3), "n_errors": 1, "n_graded": 3, "n_missing": 0},
    }


def test_error_rate_is_none_when_nothing_was_graded():
    rates = scoring.criterion_error_rates(
        grade_criterion=[0],
        grade_points=[5],
        grade_met=[MISSING],
        criterion_tags=scoring.encode_tags([["cluster:refer"]]),
    )
    assert rates["cluster:refer"] == {"error_rate": None, "n_errors": 0, "n_graded": 0, "n_missing": 1}


# --- length and score ---------------------------------------------------------------------


def test_correlation_matches_numpy():
    rng = np.random.default_rng(14)
    lengths, scores = rng.integers(50, 3000, 200), rng.uniform(-0.2, 1, 200)
    expected = np.corrcoef(lengths, scores)[0, 1]
    assert scoring.length_score_correlation(lengths, scores) == pytest.approx(expected, abs=1e-12)


def test_correlation_of_a_perfect_line_is_one():
    assert scoring.length_score_correlation([100, 200, 300], [0.1, 0.2, 0.3]) == pytest.approx(1.0)
    assert scoring.length_score_correlation([100, 200, 300], [0.3, 0.2, 0.1]) == pytest.approx(-1.0)


@pytest.mark.parametrize(
    ("lengths", "scores"),
    [
        ([100, 100, 100], [0.1, 0.5, 0.9]),  # constant length
        ([100, 200, 300], [0.1, 0.1, 0.1]),  # constant score, whose float mean is not exactly 0.1
        ([100], [0.5]),
        ([], []),
        ([100, 200], [0.5, np.nan]),  # one pair left after dropping the unscored response
    ],
)
def test_correlation_is_none_when_undefined(lengths, scores):
    assert scoring.length_score_correlation(lengths, scores) is None


# --- one resampling shared by every metric ---------------------------------------------------


def realistic_columns(n: int = 3000, seed: int = 11) -> dict[str, np.ndarray]:
    """Per-response columns shaped like a run's: overall scores (some negative), themes on a
    share of the responses each, and cluster scores that are 0 or 1 on a few responses."""
    rng = np.random.default_rng(seed)
    overall = np.clip(rng.normal(0.45, 0.3, n), -0.6, 1.0)
    theme = rng.integers(0, 4, n)
    columns = {scoring.OVERALL: overall, "axis:accuracy": np.clip(overall + rng.normal(0, 0.2, n), -1, 1)}
    for t in range(4):
        columns[f"theme:t{t}"] = np.where(theme == t, overall, np.nan)
    for c in range(6):
        share = rng.random(n) < 0.05 * (c + 1)
        columns[f"cluster:c{c}"] = np.where(share, (rng.random(n) < 0.3 + 0.1 * c).astype(float), np.nan)
    columns["cluster:rare"] = np.where(np.arange(n) < 3, 1.0, np.nan)
    return columns


def test_the_shared_bootstrap_agrees_with_the_per_metric_one():
    # Each std is an estimate from 1000 resamples (about 2% apart from the truth); two
    # independent ones, drawn differently, stay well within 12%.
    columns = realistic_columns()
    per_metric = scoring.aggregate_columns(columns, seed=0, method=scoring.PER_METRIC)
    shared = scoring.aggregate_columns(columns, seed=0, method=scoring.SHARED)
    assert shared.keys() == per_metric.keys()
    for key, value in per_metric.items():
        if key.endswith(":bootstrap_std"):
            assert shared[key] == pytest.approx(value, rel=0.12, abs=0.002), key
        else:
            assert shared[key] == value, key


def test_the_shared_bootstrap_is_the_standard_error_of_the_mean_and_reproducible():
    values = np.random.default_rng(2).random((4000, 1))
    expected = values.std() / math.sqrt(values.size)
    std = scoring.shared_bootstrap_stds(values, seed=0)
    assert std[0] == pytest.approx(expected, rel=0.1)
    assert scoring.shared_bootstrap_stds(values, seed=0)[0] == std[0]
    assert scoring.shared_bootstrap_stds(values, seed=1)[0] != std[0]
    assert scoring.shared_bootstrap_stds(np.array([[0.3]]), seed=0)[0] == pytest.approx(0.0, abs=1e-12)


def test_the_per_metric_bootstrap_is_the_one_runs_had():
    # Runs recorded before the shared resampling keep their numbers: aggregate_columns'
    # default is the per-metric draw, the same as aggregate's.
    data = load("mixed")
    per_response = per_response_metrics(data)
    names = sorted({name for metrics in per_response for name in metrics})
    columns = {name: np.array([m.get(name, np.nan) for m in per_response]) for name in names}
    assert scoring.aggregate_columns(columns, seed=3) == scoring.aggregate(per_response, seed=3)


def test_an_unknown_bootstrap_method_is_refused():
    with pytest.raises(ValueError, match="unknown bootstrap method"):
        scoring.aggregate_columns({scoring.OVERALL: np.array([0.5])}, method="other")


def test_the_multinomial_draw_does_not_depend_on_the_order_the_metrics_come_in():
    # Two runs with the same grades list their tags in the order they met them; their stds agree.
    columns = realistic_columns()
    forward = scoring.aggregate_columns(columns, seed=0, method=scoring.MULTINOMIAL)
    backward = scoring.aggregate_columns(dict(reversed(list(columns.items()))), seed=0, method=scoring.MULTINOMIAL)
    assert forward == backward
