"""Physician quality's numbers (grading/physicians/quality.py): each physician's macro F1 is the
reference's physician baseline and scikit-learn's macro F1 on the same pairs, their kappa is
scikit-learn's Cohen's kappa on those pairs; active time cuts idle gaps; intervals bracket."""

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score

from grading.metaeval.agreement import labels_from_rows, physician_agreement
from grading.physicians.quality import (
    OutlierRule,
    active_seconds,
    label_agreement,
    median_interval,
    outliers,
    rate_interval,
)
from tests.simple_evals import reference_modules


def _rows(seed: int = 3, n_items: int = 400, n_physicians: int = 9) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(n_items):
        truth = rng.random() < 0.6
        who = rng.choice(n_physicians, size=int(rng.integers(1, 5)), replace=False)
        # Physician 0 errs often, the others seldom.
        said = [bool(truth ^ (rng.random() < (0.35 if p == 0 else 0.08))) for p in who]
        rows.append(
            {
                "category": f"cluster:c{item % 3}",
                "binary_labels": said,
                "anonymized_physician_ids": [f"doc-{p}" for p in who],
            }
        )
    return rows


def _pairs(rows: list[dict], physician: str) -> tuple[list[bool], list[bool]]:
    own, other = [], []
    for row in rows:
        ids, said = row["anonymized_physician_ids"], row["binary_labels"]
        for i, pid in enumerate(ids):
            if pid == physician:
                for j in range(len(ids)):
                    if j != i:
                        own.append(said[i])
                        other.append(said[j])
    return own, other


def test_kappa_and_macro_f1_per_physician_equal_scikit_learns_on_the_same_pairs():
    rows = _rows()
    labels = labels_from_rows(rows)
    figures = label_agreement(labels, n_resamples=200)
    assert len(figures) == len(labels.physician_ids)
    for code, pid in enumerate(labels.physician_ids):
        own, other = _pairs(rows, pid)
        ours = figures[code]
        assert ours["n_pairs"] == len(own)
        assert ours["kappa"]["value"] == pytest.approx(cohen_kappa_score(other, own), abs=1e-12)
        assert ours["macro_f1"]["value"] == pytest.approx(f1_score(other, own, average="macro"), abs=1e-12)


def test_macro_f1_per_physician_is_the_references_physician_baseline():
    reference = reference_modules()["healthbench_meta_eval"]
    rows = _rows(seed=11)
    labels = labels_from_rows(rows)
    figures = label_agreement(labels, n_resamples=100)
    lists: dict[str, tuple[list, list, list]] = {}
    for row in rows:
        for i, pid in enumerate(row["anonymized_physician_ids"]):
            entry = lists.setdefault(pid, ([], [], []))
            entry[0].append(row["binary_labels"][i])
            entry[1].append(row["binary_labels"][:i] + row["binary_labels"][i + 1 :])
            entry[2].append(row["category"])
    for code, pid in enumerate(labels.physician_ids):
        theirs = reference.compute_metrics_for_rater_by_class(
            self_pred_list=lists[pid][0],
            other_preds_list=lists[pid][1],
            cluster_list=lists[pid][2],
            model_or_physician="physician",
        )
        # Exactly the reference's float, not merely close.
        assert figures[code]["macro_f1"]["value"] == theirs["pairwise_physician_f1_balanced"]["value"]


def test_macro_f1_per_physician_is_the_meta_evals_physician_baseline():
    labels = labels_from_rows(_rows(seed=5))
    baseline = physician_agreement(labels)["pairwise_physician_f1_balanced"]
    figures = label_agreement(labels, n_resamples=100)
    for code, pid in enumerate(labels.physician_ids):
        assert figures[code]["macro_f1"]["value"] == baseline[pid]["value"]


def test_shared_items_count_only_items_labelled_by_someone_else_too():
    rows = [
        {"category": "c", "binary_labels": [True, False], "anonymized_physician_ids": ["a", "b"]},
        {"category": "c", "binary_labels": [True], "anonymized_physician_ids": ["a"]},
        {"category": "c", "binary_labels": [True, True, False], "anonymized_physician_ids": ["a", "b", "c"]},
    ]
    figures = label_agreement(labels_from_rows(rows), n_resamples=50)
    assert figures[0]["n_items"] == 2
    assert figures[0]["n_pairs"] == 3
    assert figures[2]["n_items"] == 1


def test_intervals_bracket_the_point_and_narrow_with_more_items():
    small = label_agreement(labels_from_rows(_rows(n_items=200)), n_resamples=400)
    large = label_agreement(labels_from_rows(_rows(n_items=3000)), n_resamples=400)
    for figures in (small, large):
        for entry in figures.values():
            for name in ("macro_f1", "kappa"):
                e = entry[name]
                assert e["low"] is not None
                assert e["value"] is not None
                assert e["high"] is not None
                assert e["low"] <= e["value"] <= e["high"]

    def width(e) -> float:
        return e["kappa"]["high"] - e["kappa"]["low"]

    assert all(width(large[k]) < width(v) for k, v in small.items())


def test_the_interval_is_reproducible():
    labels = labels_from_rows(_rows())
    assert label_agreement(labels, n_resamples=100) == label_agreement(labels, n_resamples=100)


def test_active_time_sums_gaps_and_cuts_idle_ones():
    # Task 0: open 0, draft 60, (idle 900) answer 960 -> 60 s. Task 1: open 0, answer 40 -> 40 s.
    # Task 2: opened only -> 0. Events arrive in any order.
    task = [1, 0, 0, 2, 0, 1]
    at = [40.0, 960.0, 0.0, 5.0, 60.0, 0.0]
    assert active_seconds(task, at, n_tasks=4, idle_seconds=300).tolist() == [60.0, 40.0, 0.0, 0.0]
    # A gap of exactly the setting counts.
    assert active_seconds([0, 0], [0.0, 300.0], n_tasks=1, idle_seconds=300).tolist() == [300.0]


def test_median_interval_is_the_order_statistic_interval():
    # n = 10 at 95%: P(B <= 1) = 11/1024 <= 0.025 < P(B <= 2) = 56/1024, so [x(2), x(9)].
    x = [9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0, 10.0]
    assert median_interval(x) == {"value": 5.5, "low": 2.0, "high": 9.0}
    # Five values cannot give 95%: P(B = 0) = 1/32 > 0.025.
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == {"value": 3.0, "low": None, "high": None}
    assert median_interval([])["value"] is None


def test_median_interval_covers_the_true_median_as_often_as_it_says():
    rng = np.random.default_rng(4)
    hits = 0
    for _ in range(400):
        e = median_interval(rng.lognormal(3, 0.5, size=41))
        hits += e["low"] <= np.exp(3) <= e["high"]
    assert hits / 400 >= 0.93


def test_rate_interval_is_wilsons():
    # Wilson's 95% interval for 20 of 100: 0.1333 .. 0.2888 (textbook value).
    e = rate_interval(20, 100)
    assert e["value"] == 0.2
    assert e["low"] == pytest.approx(0.13330, abs=1e-4)
    assert e["high"] == pytest.approx(0.28876, abs=1e-4)
    assert rate_interval(0, 0)["value"] is None


def test_outliers_need_the_whole_interval_apart_by_the_margin():
    def est(value, low, high):
        return {"value": value, "low": low, "high": high}

    agreement = {0: est(0.9, 0.85, 0.95), 1: est(0.88, 0.8, 0.93), 2: est(0.6, 0.55, 0.7), 3: est(0.85, 0.7, 0.86)}
    seconds = {0: est(30, 28, 32), 1: est(31, 29, 33), 2: est(29, 27, 31), 3: est(62, 58, 66)}
    cant = {0: est(0.02, 0.01, 0.03), 1: est(0.2, 0.16, 0.24), 2: est(0.03, 0.02, 0.04), 3: est(0.02, 0.01, 0.03)}
    flags = outliers(agreement, seconds, cant, OutlierRule())
    assert {p: [f["measure"] for f in fs] for p, fs in flags.items()} == {
        1: ["cant_judge"],
        2: ["agreement"],
        3: ["active_time"],
    }
    assert flags[2][0]["others_median"] == 0.88


def test_the_vectorised_multinomial_draws_as_numpys_does():
    from grading.physicians.quality import _multinomial

    rng = np.random.default_rng(9)
    n = np.array([40, 7, 300])
    pvals = np.array([[0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.1, 0.7], [0.25, 0.25, 0.25, 0.25]])
    ours = _multinomial(rng, n, pvals, 20_000)
    assert (ours.sum(axis=2) == n).all()
    assert (ours[:, 0, 3] == 0).all()
    numpys = rng.multinomial(n, pvals, size=(20_000, 3))
    assert np.allclose(ours.mean(axis=0), numpys.mean(axis=0), rtol=0.03, atol=0.05)
    assert np.allclose(ours.var(axis=0), numpys.var(axis=0), rtol=0.06, atol=0.05)


def test_weekly_bars_scale_to_the_busiest_week():
    from grading.physicians.charts import HEIGHT, weekly_bars

    weeks = [
        {"week": "2026-W10", "label": 4, "rubric": 0},
        {"week": "2026-W11", "label": 1, "rubric": 1},
        {"week": "2026-W12", "label": 0, "rubric": 0},
    ]
    chart = weekly_bars(weeks, ["label", "rubric"])
    assert [b["total"] for b in chart["bars"]] == [4, 2, 0]
    assert [b["height"] for b in chart["bars"]] == [HEIGHT, HEIGHT / 2, 0]
    assert weekly_bars([], ["label"])["bars"] == []
