"""Cohen's kappa and Krippendorff's alpha, against scikit-learn and the krippendorff package.

Both packages are test-only dependencies; each cross-check skips cleanly without its package.
"""

import json
import warnings

import numpy as np
import pytest

from grading.metaeval.agreement import MetaEvalLabels, labels_from_rows
from grading.metaeval.chance import ALPHA, KAPPA, grader_kappa, physician_alpha


def random_labels(seed: int, *, n_items: int = 300, n_categories: int = 4, p_yes: float = 0.6):
    """Items with 1-4 labels of 8 physicians and a grader label (some missing), in the file layout."""
    rng = np.random.default_rng(seed)
    rows, grader = [], []
    for i in range(n_items):
        k = int(rng.integers(1, 5))
        truth = rng.random() < p_yes
        physicians = rng.choice(8, size=k, replace=False)
        rows.append(
            {
                "category": f"cluster:c{i % n_categories}",
                "binary_labels": [bool(truth if rng.random() < 0.8 else not truth) for _ in range(k)],
                "anonymized_physician_ids": [f"doc-{p}" for p in physicians],
            }
        )
        grader.append(np.nan if rng.random() < 0.05 else float(truth if rng.random() < 0.75 else not truth))
    return rows, np.array(grader)


def sklearn_kappa(rows, grader, category=None):
    from sklearn.metrics import cohen_kappa_score

    said, truth = [], []
    for row, g in zip(rows, grader, strict=True):
        if np.isnan(g) or (category is not None and row["category"] != category):
            continue
        for label in row["binary_labels"]:
            said.append(bool(g))
            truth.append(label)
    if not said:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = cohen_kappa_score(said, truth)
    return None if np.isnan(value) else float(value)


def package_alpha(rows, category=None):
    krippendorff = pytest.importorskip("krippendorff")
    chosen = [r for r in rows if category is None or r["category"] == category]
    physicians = sorted({p for r in chosen for p in r["anonymized_physician_ids"]})
    data = np.full((len(physicians), len(chosen)), np.nan)
    for j, row in enumerate(chosen):
        for pid, label in zip(row["anonymized_physician_ids"], row["binary_labels"], strict=True):
            data[physicians.index(pid), j] = float(label)
    try:
        value = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    except ValueError:  # "more than one value in the domain" / "no unit with two coders"
        return None
    return None if np.isnan(value) else float(value)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kappa_equals_scikit_learn_on_the_same_pairs_overall_and_per_category(seed):
    pytest.importorskip("sklearn")
    rows, grader = random_labels(seed)
    out = grader_kappa(labels_from_rows(rows), grader, n_resamples=50, seed=0)
    assert out[KAPPA]["value"] == pytest.approx(sklearn_kappa(rows, grader), abs=1e-12)
    for c in range(4):
        name = f"cluster:c{c}"
        assert out[f"{name}: {KAPPA}"]["value"] == pytest.approx(sklearn_kappa(rows, grader, name), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alpha_equals_the_krippendorff_package_overall_and_per_category(seed):
    rows, _ = random_labels(seed)
    out = physician_alpha(labels_from_rows(rows), n_resamples=50, seed=0)
    assert out[ALPHA]["value"] == pytest.approx(package_alpha(rows), abs=1e-12)
    for c in range(4):
        name = f"cluster:c{c}"
        assert out[f"{name}: {ALPHA}"]["value"] == pytest.approx(package_alpha(rows, name), abs=1e-12)


def test_kappa_is_counted_over_the_same_pairs_as_the_pairwise_f1():
    from grading.metaeval.agreement import grader_agreement

    rows, grader = random_labels(5)
    labels = labels_from_rows(rows)
    f1 = grader_agreement(labels, grader)["pairwise_model_f1_balanced"]["n"]
    # The balanced F1's n is (TP+FP+FN) + (TN+FN+FP): every pair once plus the disagreements once more.
    pairs = grader_kappa(labels, grader, n_resamples=10, seed=0)[KAPPA]["n"]
    said = [
        (bool(g), label) for r, g in zip(rows, grader, strict=True) if not np.isnan(g) for label in r["binary_labels"]
    ]
    assert pairs == len(said)
    assert f1 == len(said) + sum(s != t for s, t in said)


def test_one_class_only_makes_both_undefined_not_nan():
    rows = [{"category": "cluster:a", "binary_labels": [True, True], "anonymized_physician_ids": ["x", "y"]}] * 3
    labels = labels_from_rows(rows)
    kappa = grader_kappa(labels, [1.0, 1.0, 1.0], n_resamples=20, seed=0)[KAPPA]
    alpha = physician_alpha(labels, n_resamples=20, seed=0)[ALPHA]
    assert sklearn_kappa(rows, np.ones(3)) is None
    assert package_alpha(rows) is None
    assert kappa["value"] is None
    assert kappa["low"] is None
    assert kappa["n"] == 6
    assert kappa["n_defined"] == 0
    assert alpha["value"] is None
    assert alpha["n_defined"] == 0
    json.dumps({"k": kappa, "a": alpha}, allow_nan=False)


def test_one_rater_per_item_leaves_alpha_undefined_and_kappa_defined():
    rows = [
        {"category": "cluster:a", "binary_labels": [i % 2 == 0], "anonymized_physician_ids": [f"d{i}"]}
        for i in range(6)
    ]
    grader = np.array([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    labels = labels_from_rows(rows)
    assert package_alpha(rows) is None
    alpha = physician_alpha(labels, n_resamples=20, seed=0)
    assert alpha[ALPHA] == {"value": None, "n": 0, "low": None, "high": None, "n_defined": 0, "n_resamples": 20}
    kappa = grader_kappa(labels, grader, n_resamples=20, seed=0)[KAPPA]
    assert kappa["value"] == pytest.approx(sklearn_kappa(rows, grader), abs=1e-12)


def test_a_grader_that_never_labelled_has_no_kappa():
    rows, _ = random_labels(1, n_items=20)
    out = grader_kappa(labels_from_rows(rows), np.full(20, np.nan), n_resamples=10, seed=0)
    assert out[KAPPA]["value"] is None
    assert out[KAPPA]["n"] == 0


def _defined(*values: float | None) -> list[float]:
    assert None not in values, values
    return [v for v in values if v is not None]


def test_intervals_bracket_the_value_and_are_reproducible():
    rows, grader = random_labels(3, n_items=600)
    labels = labels_from_rows(rows)
    first = grader_kappa(labels, grader, seed=4)[KAPPA]
    assert first == grader_kappa(labels, grader, seed=4)[KAPPA]
    low, value, high = _defined(first["low"], first["value"], first["high"])
    assert low < value < high
    assert first["n_defined"] == 1000
    alpha = physician_alpha(labels, seed=4)[ALPHA]
    low, value, high = _defined(alpha["low"], alpha["value"], alpha["high"])
    assert low < value < high


def test_an_interval_matches_a_plain_item_bootstrap_in_distribution():
    """The by-type multinomial draw must resample items like drawing item indexes does."""
    from sklearn.metrics import cohen_kappa_score

    rows, grader = random_labels(8, n_items=150, n_categories=1)
    ours = grader_kappa(labels_from_rows(rows), grader, n_resamples=1000, seed=1)[KAPPA]
    rng = np.random.default_rng(2)
    kept = [i for i in range(len(rows)) if not np.isnan(grader[i])]
    values = []
    for _ in range(1000):
        draw = rng.choice(kept, size=len(kept))
        said = [bool(grader[i]) for i in draw for _ in rows[i]["binary_labels"]]
        truth = [label for i in draw for label in rows[i]["binary_labels"]]
        values.append(cohen_kappa_score(said, truth))
    low, high = np.quantile(values, [0.025, 0.975])
    assert ours["low"] == pytest.approx(low, abs=0.03)
    assert ours["high"] == pytest.approx(high, abs=0.03)


def test_every_category_is_listed_even_when_undefined():
    labels = MetaEvalLabels(
        item=np.array([0, 0, 1]),
        category=np.array([0, 0, 1]),
        physician=np.array([0, 1, 0]),
        label=np.array([True, False, True]),
        category_names=("cluster:a", "cluster:b"),
        physician_ids=("x", "y"),
        n_items=2,
    )
    alpha = physician_alpha(labels, n_resamples=10, seed=0)
    assert list(alpha) == [ALPHA, f"cluster:a: {ALPHA}", f"cluster:b: {ALPHA}"]
    assert alpha[f"cluster:b: {ALPHA}"]["value"] is None
