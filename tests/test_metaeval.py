"""grading.metaeval.agreement: agreement figures against the public reference, and our additions.

The golden files in fixtures/metaeval hold inputs and the output of the reference
implementation (openai/simple-evals ``healthbench_meta_eval.py``), computed by
scripts/golden_files.py with the reference's own code (tests/test_golden_files.py checks them).
Physician ids there are stored as indices into ``physician_ids`` to keep the files small. For
the real HealthBench samples only the grader labels drawn from ``grader_seed`` and the
reference's output are stored; the labels are read from the shared sample folder.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from grading.metaeval import agreement as metaeval
from grading.metaeval.agreement import MetaEvalLabels, labels_from_rows

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "metaeval"
SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "healthbench-samples"
GENERATED = ["edge_cases", "random_small", "random_multi"]
REAL = [
    ("labels_only_sample", "meta_eval_labels_only_sample.jsonl"),
    ("meta_eval_sample", "meta_eval_sample.jsonl"),
]
BASE_NAMES = {
    f"pairwise_model_{metric}_{cls}" for metric in ("precision", "recall", "f1") for cls in ("pos", "neg", "balanced")
}


def load_fixture(name):
    return json.loads((FIXTURES / f"{name}.json").read_text())


def generated_case(name):
    """(labels, grader, golden) for a generated fixture."""
    golden = load_fixture(name)
    rows = [
        {"category": c, "binary_labels": labels, "anonymized_physician_ids": ids}
        for c, labels, ids, _ in golden["rows"]
    ]
    grader = [g for *_, g in golden["rows"]]
    return labels_from_rows(rows), grader, golden


def real_case(name, filename):
    path = SAMPLES / filename
    if not path.exists():
        pytest.skip(f"shared sample {path} is not available")
    golden = load_fixture(name)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    assert [r["completion_id"] for r in rows] == golden["completion_ids"]
    return labels_from_rows(rows), golden["grader"], golden


def rows_to_labels(*rows):
    """Labels from (category, [labels], [physician ids]) tuples."""
    return labels_from_rows({"category": c, "binary_labels": b, "anonymized_physician_ids": p} for c, b, p in rows)


def assert_same_metric(ours, n, value, name):
    assert isinstance(ours["n"], int), name
    # The reference derives F1 counts through float arithmetic (7.0); ours are exact ints.
    assert ours["n"] == round(n), (name, ours, n)
    assert abs(ours["n"] - n) < 1e-6, (name, ours, n)
    assert ours["value"] == pytest.approx(value, rel=0, abs=1e-9), (name, ours, value)


def assert_grader_side_matches(labels, grader, golden):
    ours = metaeval.grader_agreement(labels, grader)
    assert set(ours) == set(golden["model"])
    for name, (n, value) in golden["model"].items():
        assert_same_metric(ours[name], n, value, name)


def assert_physician_side_matches(labels, golden):
    ours = metaeval.physician_agreement(labels)
    ids = golden["physician_ids"]
    assert set(ours) == set(golden["physician"])
    for name, by_index in golden["physician"].items():
        expected = {ids[int(i)]: nv for i, nv in by_index.items()}
        assert set(ours[name]) == set(expected), name
        for pid, (n, value) in expected.items():
            assert_same_metric(ours[name][pid], n, value, f"{name} / {pid}")


def _defined(*values: float | None) -> list[float]:
    assert None not in values, values
    return [v for v in values if v is not None]


@pytest.mark.parametrize("name", GENERATED)
def test_grader_agreement_matches_the_reference(name):
    labels, grader, golden = generated_case(name)
    assert_grader_side_matches(labels, grader, golden)


@pytest.mark.parametrize("name", GENERATED)
def test_physician_baseline_matches_the_reference(name):
    labels, _, golden = generated_case(name)
    assert_physician_side_matches(labels, golden)


@pytest.mark.parametrize(("name", "filename"), REAL)
def test_real_samples_match_the_reference_on_both_sides(name, filename):
    labels, grader, golden = real_case(name, filename)
    assert_grader_side_matches(labels, grader, golden)
    assert_physician_side_matches(labels, golden)


@pytest.mark.parametrize(("name", "filename"), REAL)
def test_no_real_category_name_trips_the_references_string_pairing(name, filename):
    labels, _, _ = real_case(name, filename)
    for category in labels.category_names:
        for token in ("pos", "neg", "precision", "recall", "f1", "balanced"):
            assert token not in category


def test_the_overall_scope_has_all_nine_reference_names():
    labels, grader, _ = generated_case("random_multi")
    ours = metaeval.grader_agreement(labels, grader)
    assert {name for name in ours if ": " not in name} == BASE_NAMES
    docs = metaeval.physician_agreement(labels)
    assert {name for name in docs if ": " not in name} == {name.replace("model", "physician") for name in BASE_NAMES}


def test_a_category_where_one_class_never_occurs_reports_only_that_class():
    labels, grader, _ = generated_case("edge_cases")
    ours = metaeval.grader_agreement(labels, grader)
    scoped = {k.split(": ")[1] for k in ours if k.startswith("cluster:all_yes: ")}
    assert scoped == {"pairwise_model_precision_pos", "pairwise_model_recall_pos", "pairwise_model_f1_pos"}


def test_zero_precision_and_zero_recall_give_an_f1_of_zero_not_an_undefined_one():
    labels, grader, _ = generated_case("edge_cases")
    ours = metaeval.grader_agreement(labels, grader)
    assert ours["cluster:zero_overlap: pairwise_model_f1_pos"] == {"n": 3, "value": 0.0}


def test_a_physician_who_only_labels_alone_is_left_out_of_the_baseline():
    labels, _, _ = generated_case("edge_cases")
    docs = metaeval.physician_agreement(labels)
    assert all("doc-f" not in by_physician for by_physician in docs.values())
    assert not any(name.startswith("cluster:single_only: ") for name in docs)


def test_the_worked_example_from_the_reference_tests_gives_the_same_numbers():
    # Grader says yes, no, yes; physicians [yes, yes, no], [yes, no], [no]; categories a, a, b.
    labels = rows_to_labels(
        ("a", [True, True, False], ["x", "y", "z"]),
        ("a", [True, False], ["x", "y"]),
        ("b", [False], ["x"]),
    )
    ours = metaeval.grader_agreement(labels, [True, False, True])
    assert ours["pairwise_model_precision_pos"] == {"n": 4, "value": 2 / 4}
    assert ours["pairwise_model_precision_neg"] == {"n": 2, "value": 1 / 2}
    assert ours["pairwise_model_recall_pos"] == {"n": 3, "value": 2 / 3}
    assert ours["pairwise_model_recall_neg"] == {"n": 3, "value": 1 / 3}
    p_pos, r_pos, p_neg, r_neg = 2 / 4, 2 / 3, 1 / 2, 1 / 3
    f1_pos = 2 * (p_pos * r_pos) / (p_pos + r_pos)
    f1_neg = 2 * (p_neg * r_neg) / (p_neg + r_neg)
    assert ours["pairwise_model_f1_balanced"]["value"] == (f1_pos + f1_neg) / 2
    assert ours["a: pairwise_model_precision_pos"] == {"n": 3, "value": 2 / 3}
    assert ours["b: pairwise_model_precision_pos"] == {"n": 1, "value": 0.0}
    assert ours["b: pairwise_model_recall_neg"] == {"n": 1, "value": 0.0}
    assert "b: pairwise_model_precision_neg" not in ours
    assert "b: pairwise_model_f1_balanced" not in ours


def test_f1_counts_the_union_of_pairs_and_balanced_counts_add_up():
    labels, grader, _ = generated_case("random_small")
    ours = metaeval.grader_agreement(labels, grader)
    for cls in ("pos", "neg"):
        precision, recall = ours[f"pairwise_model_precision_{cls}"], ours[f"pairwise_model_recall_{cls}"]
        both = round(precision["n"] * precision["value"])  # pairs where both said the class
        assert ours[f"pairwise_model_f1_{cls}"]["n"] == precision["n"] + recall["n"] - both
    for metric in ("precision", "recall", "f1"):
        pos, neg = ours[f"pairwise_model_{metric}_pos"], ours[f"pairwise_model_{metric}_neg"]
        assert ours[f"pairwise_model_{metric}_balanced"]["n"] == pos["n"] + neg["n"]


def test_missing_grader_labels_may_be_nan_or_none():
    labels, grader, _ = generated_case("edge_cases")
    as_floats = np.array([np.nan if g is None else float(g) for g in grader])
    assert metaeval.grader_agreement(labels, as_floats) == metaeval.grader_agreement(labels, grader)


def test_labels_from_rows_numbers_categories_and_physicians_by_first_appearance():
    labels = rows_to_labels(("b", [True], ["q"]), ("a", [False, True], ["r", "q"]))
    assert labels.category_names == ("b", "a")
    assert labels.physician_ids == ("q", "r")
    assert labels.item.tolist() == [0, 1, 1]
    assert labels.category.tolist() == [0, 1, 1]
    assert labels.physician.tolist() == [0, 1, 0]
    assert labels.label.tolist() == [True, False, True]
    assert labels.n_items == 2


def test_it_rejects_a_row_with_more_labels_than_physicians():
    with pytest.raises(ValueError, match="labels but"):
        rows_to_labels(("a", [True, False], ["q"]))


def test_it_rejects_an_item_split_across_categories():
    with pytest.raises(ValueError, match="share its category"):
        MetaEvalLabels(
            item=np.array([0, 0]),
            category=np.array([0, 1]),
            physician=np.array([0, 1]),
            label=np.array([True, False]),
            category_names=("a", "b"),
            physician_ids=("q", "r"),
            n_items=1,
        )


def test_it_rejects_grader_labels_of_the_wrong_length_or_value():
    labels = rows_to_labels(("a", [True], ["q"]), ("a", [False], ["q"]))
    with pytest.raises(ValueError, match="shape"):
        metaeval.grader_agreement(labels, [True])
    with pytest.raises(ValueError, match="0/1"):
        metaeval.grader_agreement(labels, [1.0, 2.0])


def test_bootstrap_is_reproducible_with_a_seed():
    labels, grader, _ = generated_case("random_multi")
    first = metaeval.bootstrap_f1_intervals(labels, grader, seed=42)
    again = metaeval.bootstrap_f1_intervals(labels, grader, seed=42)
    other = metaeval.bootstrap_f1_intervals(labels, grader, seed=43)
    assert first == again
    assert first != other


def test_bootstrap_reports_the_point_macro_f1_and_brackets_it():
    labels, grader, _ = generated_case("random_multi")
    model = metaeval.grader_agreement(labels, grader)
    intervals = metaeval.bootstrap_f1_intervals(labels, grader, seed=0)
    macro = {k: v for k, v in model.items() if k.endswith("pairwise_model_f1_balanced")}
    assert set(intervals) == set(macro)
    assert next(iter(intervals)) == "pairwise_model_f1_balanced"
    for name, interval in intervals.items():
        assert interval["value"] == macro[name]["value"]
        assert interval["n_resamples"] == 1000
        assert 0 < interval["n_defined"] <= 1000
        low, high = _defined(interval["low"], interval["high"])
        assert low <= high
    overall = intervals["pairwise_model_f1_balanced"]
    low, value, high = _defined(overall["low"], overall["value"], overall["high"])
    assert low <= value <= high


def test_bootstrap_leaves_out_scopes_whose_macro_f1_is_undefined():
    labels, grader, _ = generated_case("edge_cases")
    intervals = metaeval.bootstrap_f1_intervals(labels, grader, n_resamples=50, seed=0)
    assert "cluster:all_yes: pairwise_model_f1_balanced" not in intervals
    assert "cluster:mixed: pairwise_model_f1_balanced" in intervals


def test_bootstrap_matches_plain_item_resampling_in_distribution():
    labels, grader, _ = generated_case("random_multi")
    ours = metaeval.bootstrap_f1_intervals(labels, grader, n_resamples=4000, seed=1, confidence=0.8)
    # Plain bootstrap: draw item indices with replacement and recount the pairs.
    said, present = np.asarray(grader, dtype=float), ~np.isnan(np.asarray(grader, dtype=float))
    yes = np.bincount(labels.item, weights=labels.label, minlength=labels.n_items)
    no = np.bincount(labels.item, minlength=labels.n_items) - yes
    items = np.flatnonzero(present & (yes + no > 0))
    rng = np.random.default_rng(2)
    draws = items[rng.integers(0, items.size, size=(4000, items.size))]
    g, y, n = said[draws] == 1, yes[draws], no[draws]
    tp, fp = (g * y).sum(1), (g * n).sum(1)
    fn, tn = (~g * y).sum(1), (~g * n).sum(1)
    f1 = (2 * tp / (2 * tp + fp + fn) + 2 * tn / (2 * tn + fn + fp)) / 2
    low, high = np.quantile(f1, [0.1, 0.9])
    overall = ours["pairwise_model_f1_balanced"]
    assert overall["low"] == pytest.approx(low, abs=0.01)
    assert overall["high"] == pytest.approx(high, abs=0.01)


def rank_inputs(grader_value, physician_values, scope="pairwise"):
    model = {} if grader_value is None else {f"{scope}_model_f1_balanced": {"n": 9, "value": grader_value}}
    docs = {f"{scope}_physician_f1_balanced": {f"d{i}": {"n": 9, "value": v} for i, v in enumerate(physician_values)}}
    return model, docs


def test_rank_counts_physicians_above_and_below_the_grader():
    rank = metaeval.grader_rank(*rank_inputs(0.7, [0.9, 0.8, 0.6, 0.5, 0.4]))["pairwise_model_f1_balanced"]
    assert rank == {
        "value": 0.7,
        "n_physicians": 5,
        "n_higher": 2,
        "n_tied": 0,
        "n_lower": 3,
        "rank": 3,
        "percentile": 60.0,
    }


def test_rank_counts_a_tie_as_half_a_win():
    rank = metaeval.grader_rank(*rank_inputs(0.5, [0.5, 0.5 + 1e-15, 0.9, 0.1]))["pairwise_model_f1_balanced"]
    assert (rank["n_higher"], rank["n_tied"], rank["n_lower"]) == (1, 2, 1)
    assert rank["rank"] == 2
    assert rank["percentile"] == 50.0


def test_rank_of_an_undefined_grader_value_is_none_but_physicians_are_counted():
    rank = metaeval.grader_rank(*rank_inputs(None, [0.5, 0.6]))["pairwise_model_f1_balanced"]
    assert rank["value"] is None
    assert rank["rank"] is None
    assert rank["percentile"] is None
    assert rank["n_physicians"] == 2


def test_rank_without_any_physician_has_no_percentile():
    model, _ = rank_inputs(0.5, [])
    rank = metaeval.grader_rank(model, {})["pairwise_model_f1_balanced"]
    assert (rank["rank"], rank["n_physicians"], rank["percentile"]) == (1, 0, None)


def test_rank_is_given_per_category_on_real_figures():
    labels, grader, _ = generated_case("random_multi")
    model = metaeval.grader_agreement(labels, grader)
    docs = metaeval.physician_agreement(labels)
    ranks = metaeval.grader_rank(model, docs)
    name = f"{labels.category_names[2]}: pairwise_model_f1_balanced"
    values = [m["value"] for m in docs[name.replace("model", "physician")].values()]
    assert ranks[name]["n_physicians"] == len(values)
    assert ranks[name]["n_higher"] == sum(v > model[name]["value"] for v in values)


def test_majority_disagreements_list_items_against_a_strict_majority_strongest_first():
    labels = rows_to_labels(
        ("a", [True, True, False], ["p", "q", "r"]),  # 0: majority yes, grader no -> flagged
        ("a", [True, False], ["p", "q"]),  # 1: tie -> listed apart
        ("b", [False, False, False], ["p", "q", "r"]),  # 2: unanimous no, grader yes -> first
        ("b", [True], ["p"]),  # 3: grader agrees
        ("b", [False], ["q"]),  # 4: no grader label
    )
    found = metaeval.majority_disagreements(labels, [False, True, True, True, None])
    assert found == {
        "item": [2, 0],
        "category": ["b", "a"],
        "grader": [True, False],
        "n_yes": [0, 2],
        "n_no": [3, 1],
        "tied_item": [1],
    }


def test_items_without_a_grader_label_are_never_flagged_or_listed_as_ties():
    labels = rows_to_labels(("a", [True, False], ["p", "q"]), ("a", [True, True], ["p", "q"]))
    found = metaeval.majority_disagreements(labels, [None, None])
    assert found["item"] == []
    assert found["tied_item"] == []


def test_the_report_bundles_every_part():
    labels, grader, _ = generated_case("random_small")
    report = metaeval.meta_eval_report(labels, grader, n_resamples=100, seed=3)
    assert set(report) == {"model", "physician", "intervals", "rank", "disagreements", "review"}
    assert report["model"] == metaeval.grader_agreement(labels, grader)
    assert report["intervals"] == metaeval.bootstrap_f1_intervals(labels, grader, n_resamples=100, seed=3)


def paper_sized_labels(seed=0):
    """60,896 labels, about 30k items, 34 categories and 250 physicians, like the paper."""
    rng = np.random.default_rng(seed)
    per_item = rng.choice([1, 2, 2, 2, 2, 3], size=31_000)
    per_item = per_item[: np.searchsorted(np.cumsum(per_item), 60_896) + 1]
    per_item[-1] -= per_item.sum() - 60_896
    n_items = per_item.size
    item = np.repeat(np.arange(n_items), per_item)
    item_category = rng.integers(0, 34, size=n_items)
    labels = MetaEvalLabels(
        item=item,
        category=item_category[item],
        physician=rng.integers(0, 250, size=item.size),
        label=rng.random(item.size) < 0.4 + item_category[item] / 100,
        category_names=tuple(f"cluster:c{k}" for k in range(34)),
        physician_ids=tuple(f"doc{k}" for k in range(250)),
        n_items=n_items,
    )
    return labels, (rng.random(n_items) < 0.5).astype(float)


def test_the_full_report_at_paper_size_has_every_category_and_interval():
    # Speed is measured by bench/metaeval_bench.py; this checks the shape at that size.
    labels, grader = paper_sized_labels()
    assert labels.item.size == 60_896
    report = metaeval.meta_eval_report(labels, grader, seed=0)
    assert report["intervals"]["pairwise_model_f1_balanced"]["n_resamples"] == 1000
    categories = {name.split(": ")[0] for name in report["model"] if ": " in name}
    assert len(categories) == 34


def test_the_review_separates_physicians_who_split_from_a_grader_against_agreeing_physicians():
    labels = rows_to_labels(
        ("a", [True, True, False], ["p", "q", "r"]),  # a 2-1 split, grader with the majority
        ("a", [True, True], ["p", "q"]),  # agreeing physicians, the grader against them
        ("b", [False, False, False], ["p", "q", "r"]),  # agreeing physicians, the grader with them
        ("b", [True, False], ["p", "q"]),  # a tie
        ("b", [True], ["p"]),  # one physician: neither cause
    )
    review = metaeval.review_causes(labels, [True, False, False, True, False])
    split, against = review[metaeval.PHYSICIANS_SPLIT], review[metaeval.GRADER_AGAINST_AGREEING]
    assert sorted(split["item"]) == [0, 3]
    assert against["item"] == [1]
    assert split["counts"] == {"a": 1, "b": 1, "overall": 2}
    assert against["counts"] == {"a": 1, "b": 0, "overall": 1}
