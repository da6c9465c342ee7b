"""run_report: from the database to the reference's numbers, end to end.

The golden fixtures in ``fixtures/scoring/`` (rubrics, grades, and what openai/simple-evals
computed from them, recomputed by scripts/golden_files.py) are turned into a HealthBench
dataset file and a simple-evals results file, imported with import_healthbench and import_run,
and reported with run_report.
"""

import csv
import io
import json
import random
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.models import Conversation, Criterion, Subset, SubsetVersion
from annotation.services.subset_versions import subset_version_freeze
from grading.models import Grade, Response, Run
from grading.reports import scoring
from grading.reports.report import run_report
from grading.reports.selectors import run_grades_get
from tests import healthbench_rows as rows
from tests.conftest import sample_file
from tests.test_import_run import graded_row, import_dataset, import_run, result_example, write_results
from tests.test_scoring import load

GOLDEN = ["mixed", "mostly_negative", "bootstrap"]


def dataset_row(name: str, i: int, conversation: dict) -> dict:
    rubrics = [
        {"criterion": f"Criterion {j} of {name} conversation {i}.", "points": c["points"], "tags": c["tags"]}
        for j, c in enumerate(conversation["criteria"])
    ]
    return rows.row(f"{name}-{i:03d}", rubrics=rubrics, example_tags=conversation["example_tags"])


def fixture_examples(name: str, data: dict, dataset: list[dict]) -> list[dict]:
    """The fixture's responses as result examples: same grades, completions of the same length."""
    examples = []
    for r, response in enumerate(data["responses"]):
        row = dataset[response["conversation"]]
        items = [
            {**item, "criteria_met": met, "explanation": f"Grade {j} of response {r}."}
            for j, (item, met) in enumerate(zip(row["rubrics"], response["met"], strict=True))
        ]
        completion = (f"Response {r}. " + "x" * response["length"])[: response["length"]]
        examples.append(result_example(row["prompt_id"], items, completion))
    return examples


def import_fixture(name: str, tmp_path, *, change=None) -> Run:
    """import_healthbench + import_run of a golden fixture; `change` may edit the examples first."""
    data = load(name)
    dataset = [dataset_row(name, i, c) for i, c in enumerate(data["conversations"])]
    import_dataset(tmp_path, *dataset)
    examples = fixture_examples(name, data, dataset)
    if change:
        change(examples)
    import_run(write_results(tmp_path / f"{name}_allresults.json", examples), name=name)
    return Run.objects.get(name=name)


def report_json(name: str, *extra: str) -> dict:
    out = StringIO()
    call_command("run_report", name, "--format", "json", *extra, stdout=out)
    return json.loads(out.getvalue())


def clipped_means(per_response: list[dict]) -> dict[str, tuple[float, int]]:
    """Clipped mean and count of every metric: the reference's aggregation, without the bootstrap."""
    columns: dict[str, list[float]] = {}
    for metrics in per_response:
        for key, value in metrics.items():
            columns.setdefault(key, []).append(value)
    return {key: (float(np.clip(np.mean(v), 0, 1)), len(v)) for key, v in columns.items()}


# --- the reference's numbers ----------------------------------------------------------------


@pytest.mark.parametrize("name", GOLDEN)
def test_the_report_gives_the_reference_means_exactly(db, tmp_path, name):
    data = load(name)
    import_fixture(name, tmp_path)
    report = report_json(name)
    reference = data["reference_metrics"]
    assert report["metrics"].keys() == reference.keys()
    assert report["score"] == data["reference_score"]
    for key, value in reference.items():
        if not key.endswith(":bootstrap_std"):
            assert report["metrics"][key] == value, key


def test_bootstrap_stds_are_close_to_the_reference(db, tmp_path):
    # 1000 resamples estimate a std to about 2%; two independent estimates stay well in 15%.
    data = load("bootstrap")
    import_fixture("bootstrap", tmp_path)
    report = report_json("bootstrap")
    for key, value in data["reference_metrics"].items():
        if key.endswith(":bootstrap_std"):
            assert report["metrics"][key] == pytest.approx(value, rel=0.15, abs=1e-9), key


def test_negative_example_scores_pull_the_mean_down_and_only_the_mean_is_clipped(db, tmp_path):
    data = load("mostly_negative")
    overall = [m["overall_score"] for m in data["reference_response_metrics"]]
    assert min(overall) < 0 < max(overall)  # the fixture has both
    import_fixture("mostly_negative", tmp_path)
    report = report_json("mostly_negative")
    assert report["score"] == 0.0
    assert report["metrics"]["overall_score"] == 0.0
    # Clipping each response first would have given a positive mean.
    assert np.mean(np.clip(overall, 0, 1)) > 0
    assert report["counts"]["examples_scored"] == len(overall)


def test_a_tag_whose_criteria_are_all_negative_gets_no_score(db, tmp_path):
    data = rows.row(
        "p-neg",
        rubrics=[rows.rubric_item("Suggests rest.", 5, "accuracy"), rows.rubric_item("Is rude.", -3, "completeness")],
    )
    import_dataset(tmp_path, data)
    items = [{**item, "criteria_met": True, "explanation": ""} for item in data["rubrics"]]
    import_run(write_results(tmp_path / "r.json", [result_example("p-neg", items)]), name="neg")
    metrics = report_json("neg")["metrics"]
    assert "axis:completeness" not in metrics
    assert metrics["axis:accuracy"] == 1.0
    assert metrics["overall_score"] == pytest.approx(2 / 5)


@pytest.mark.parametrize("name", ["mixed", "mostly_negative"])
def test_the_extra_reports_match_a_direct_computation(db, tmp_path, name):
    data = load(name)
    import_fixture(name, tmp_path)
    report = report_json(name)
    overall = np.array([m["overall_score"] for m in data["reference_response_metrics"]])
    conversation = np.array([r["conversation"] for r in data["responses"]])
    lengths = np.array([r["length"] for r in data["responses"]])
    assert report["length_score_correlation"] == pytest.approx(np.corrcoef(lengths, overall)[0, 1], abs=1e-12)
    expected = scoring.worst_at_k(overall, conversation)
    assert report["worst_at_k"] == {str(k): pytest.approx(v, abs=1e-12) for k, v in expected.items()}
    errors: dict[str, list[int]] = {}
    for response in data["responses"]:
        criteria = data["conversations"][response["conversation"]]["criteria"]
        for criterion, met in zip(criteria, response["met"], strict=True):
            for tag in criterion["tags"]:
                if tag.startswith("cluster:"):
                    errors.setdefault(tag, []).append(met != (criterion["points"] > 0))
    assert report["consensus_error_rates"].keys() == errors.keys()
    for tag, flags in errors.items():
        rate = report["consensus_error_rates"][tag]
        assert (rate["n_errors"], rate["n_graded"], rate["n_missing"]) == (sum(flags), len(flags), 0)
        assert rate["error_rate"] == pytest.approx(sum(flags) / len(flags))


def sample_run(tmp_path, rows_of_file: list[dict], name: str, seed: int = 3) -> list[dict]:
    """Grade every rubric item of every row twice at random; return the per-response metrics."""
    rng = random.Random(seed)
    examples, expected = [], []
    for row in rows_of_file:
        for k in range(2):
            met = [rng.random() < 0.6 for _ in row["rubrics"]]
            examples.append(graded_row(row, met, completion=f"Sample {k} of {row['prompt_id']}." + " words" * k))
            rubric = row["rubrics"]
            if any(item["points"] > 0 for item in rubric):
                points, tags = [item["points"] for item in rubric], [item["tags"] for item in rubric]
                expected.append(scoring.example_metrics(points, met, tags, row["example_tags"]))
    import_run(write_results(tmp_path / f"{name}_allresults.json", examples), name=name)
    return expected


def test_a_run_on_the_public_sample_rows_matches_a_direct_computation(db, tmp_path):
    path = sample_file("eval_sample.jsonl")
    call_command("import_healthbench", str(path), stdout=StringIO())
    expected = sample_run(tmp_path, [json.loads(line) for line in path.read_text().splitlines()], "sample")
    report = report_json("sample")
    assert not Grade.objects.filter(criterion__isnull=True).exists()
    means = clipped_means(expected)
    assert report["metrics"].keys() - {"score:n_samples", "score:bootstrap_std"} == {
        name + suffix for name in means for suffix in ("", ":n_samples", ":bootstrap_std")
    }
    for key, (mean, count) in means.items():
        assert report["metrics"][key] == pytest.approx(mean, abs=1e-12), key
        assert report["metrics"][f"{key}:n_samples"] == count, key


def test_a_consensus_file_run_matches_the_cluster_criteria_of_merged_conversations(db, tmp_path):
    for name in ("eval_sample.jsonl", "consensus_sample.jsonl"):
        call_command("import_healthbench", str(sample_file(name)), stdout=StringIO())
    consensus = [json.loads(line) for line in sample_file("consensus_sample.jsonl").read_text().splitlines()]
    expected = sample_run(tmp_path, consensus, "consensus")
    # Cluster texts repeat across clusters: matching uses the tags too, so every grade finds its criterion.
    graded = Grade.objects.filter(run__name="consensus").select_related("criterion")
    assert all(g.criterion is not None and g.criterion.tags == g.tags for g in graded)
    report = report_json("consensus")
    assert report["metrics"]["overall_score"] == pytest.approx(clipped_means(expected)["overall_score"][0], abs=1e-12)


# --- partially graded responses -------------------------------------------------------------


def test_failed_grades_leave_their_examples_out_and_are_counted(db, tmp_path):
    data = load("mixed")
    gaps = {0: 1, 9: 2}  # response -> number of failed grades

    def fail_some(examples):
        for response, count in gaps.items():
            for item in examples[response]["rubric_items"][:count]:
                item["criteria_met"] = None

    import_fixture("mixed", tmp_path, change=fail_some)
    report = report_json("mixed")
    n = len(data["responses"])
    assert report["counts"] == {
        "grades": sum(len(r["met"]) for r in data["responses"]),
        "graded": sum(len(r["met"]) for r in data["responses"]) - 3,
        "failed": 3,
        "missing": 0,
        "examples": n,
        "examples_scored": n - 2,
        "examples_left_out": 2,
        "examples_incomplete": 2,
        "examples_unscorable": 0,
        "refusals": 0,
        "truncated": 0,
    }
    complete = [m for r, m in enumerate(data["reference_response_metrics"]) if r not in gaps]
    for key, (mean, count) in clipped_means(complete).items():
        assert report["metrics"][key] == pytest.approx(mean, abs=1e-12), key
        assert report["metrics"][f"{key}:n_samples"] == count
    # A failed grade is neither an error nor in the denominator of an error rate.
    assert sum(r["n_missing"] for r in report["consensus_error_rates"].values()) == sum(
        1
        for response, count in gaps.items()
        for c in data["conversations"][data["responses"][response]["conversation"]]["criteria"][:count]
        if any(t.startswith("cluster:") for t in c["tags"])
    )


def graded_run(name: str, conversation: Conversation, grades_per_response: list[list[bool | None]], **fields) -> Run:
    """A run on the frozen 'all' subset that graded the conversation's criteria in order; a list
    shorter than the rubric leaves grades missing."""
    version = subset_version_freeze(subset=Subset.objects.get(name="all"))[0]
    run = Run.objects.create(
        plan=Run.Plan.SUBSET_VERSION, name=name, status=Run.Status.DONE, subset_version=version, **fields
    )
    criteria = list(conversation.criteria.order_by("position"))
    for k, mets in enumerate(grades_per_response):
        response = Response.objects.create(conversation=conversation, text=f"Sample {k}.", sample_index=k)
        for criterion, met in zip(criteria, mets, strict=False):  # a short list leaves grades missing
            Grade.objects.create(
                run=run,
                response=response,
                criterion=criterion,
                position=criterion.position,
                criterion_text=criterion.text,
                points=criterion.points,
                tags=criterion.tags,
                status=Grade.Status.GRADED if met is not None else Grade.Status.FAILED,
                met=met,
            )
    return run


def test_criteria_without_a_grade_row_are_missing_and_leave_the_example_out(db, tmp_path):
    import_dataset(tmp_path, rows.row("p-1"))  # three criteria: +6, +8, -9
    conversation = Conversation.objects.get()
    graded_run("graded", conversation, [[True, True, False], [True, False], [True, None, False]])
    report = run_report(run=Run.objects.get(name="graded")).data
    assert report["counts"]["missing"] == 1
    assert report["counts"]["failed"] == 1
    assert report["counts"]["graded"] == 7
    assert (report["counts"]["examples_scored"], report["counts"]["examples_left_out"]) == (1, 2)
    assert report["metrics"]["overall_score"] == 1.0
    assert report["metrics"]["overall_score:n_samples"] == 1


def test_a_consensus_run_expects_only_the_cluster_criteria_of_its_subset_version(db, tmp_path):
    import_dataset(tmp_path, rows.consensus_row("p-c"))  # four criteria, two of them level:cluster
    conversation = Conversation.objects.get()
    subset = Subset.objects.create(name="consensus", kind=Subset.Kind.CONSENSUS)
    rubric = [{"criterion": c.text, "points": c.points, "tags": c.tags} for c in conversation.criteria.all()]
    snapshot = [{"prompt_id": "p-c", "rubrics": rubric}]
    version = SubsetVersion.objects.create(subset=subset, number=1, content_hash="0" * 64, snapshot=snapshot)
    run = Run.objects.create(
        plan=Run.Plan.SUBSET_VERSION, name="consensus-run", status=Run.Status.DONE, subset_version=version
    )
    cluster = list(Criterion.objects.filter(level=Criterion.Level.CLUSTER).order_by("position"))
    for k, graded_criteria in enumerate([cluster, cluster[:1]]):
        response = Response.objects.create(conversation=conversation, text="Call 911.", sample_index=k)
        for c in graded_criteria:
            Grade.objects.create(
                run=run,
                response=response,
                criterion=c,
                position=c.position,
                criterion_text=c.text,
                points=c.points,
                tags=c.tags,
                met=True,
            )
    report = run_report(run=run).data
    assert report["counts"]["missing"] == 1
    assert (report["counts"]["examples_scored"], report["counts"]["examples_incomplete"]) == (1, 1)
    assert report["metrics"]["level:cluster"] == 1.0
    assert "level:example" not in report["metrics"]


def test_a_regrade_expects_the_grades_of_the_run_it_regrades(db, tmp_path):
    data = rows.row("p-1")
    import_dataset(tmp_path, data)
    complete = graded_row(data, [True, True, False])
    two_items = {**complete, "rubric_items": complete["rubric_items"][:2]}
    import_run(write_results(tmp_path / "r.json", [complete, two_items]), name="source")
    source = Run.objects.get(name="source")
    regrade = Run.objects.create(
        plan=Run.Plan.SOURCE_RUN, name="regrade", status=Run.Status.DONE, responses_from=source
    )
    # The regrade re-does the first two grades of every response: the second response is complete.
    for grade in Grade.objects.filter(run=source, position__lt=2):
        grade.pk, grade.run, grade.met = None, regrade, not grade.met
        grade.save()
    report = run_report(run=regrade).data
    assert report["counts"]["missing"] == 1
    assert (report["counts"]["examples_scored"], report["counts"]["examples_incomplete"]) == (1, 1)
    assert report["score"] == 0.0  # the second response met neither of its positive criteria


def test_reused_grades_are_counted(db, tmp_path):
    import_dataset(tmp_path, rows.row("p-1"))
    run = graded_run("graded", Conversation.objects.get(), [[True, True, False]])
    Grade.objects.filter(position__lt=2).update(reused=True)
    assert run_report(run=run).data["reused"] == 2


def test_a_run_without_grades_has_no_score(db):
    Run.objects.create(plan=Run.Plan.STORED, name="empty")
    report = report_json("empty")
    assert report["score"] is None
    assert report["metrics"] == {}
    assert report["counts"]["examples"] == 0


# --- the command ------------------------------------------------------------------------------


def test_csv_has_one_row_per_metric_with_score_first(db, tmp_path):
    import_fixture("mixed", tmp_path)
    report = report_json("mixed")
    out = StringIO()
    call_command("run_report", "mixed", "--format", "csv", stdout=out)
    table = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert out.getvalue().startswith("name,value,n_samples,bootstrap_std\n")
    # After the metrics, how their stds were drawn and whose responses they are (an imported
    # run has no grader rows, and its responses are stored ones with no model name).
    assert table[-3:] == [
        {"name": "bootstrap:method", "value": "one-draw", "n_samples": "", "bootstrap_std": ""},
        {"name": "responses:origin", "value": "stored", "n_samples": "", "bootstrap_std": ""},
        {"name": "responses:model", "value": "", "n_samples": "", "bootstrap_std": ""},
    ]
    del table[-3:]
    names = [row["name"] for row in table]
    assert names[0] == "score"
    assert names[1:] == sorted(names[1:])
    metrics = report["metrics"]
    assert set(names) == {k for k in metrics if not k.endswith((":n_samples", ":bootstrap_std"))} | {"score"}
    for row in table[1:]:
        name = row["name"]
        assert float(row["value"]) == metrics[name]
        assert int(row["n_samples"]) == metrics[f"{name}:n_samples"]
        assert float(row["bootstrap_std"]) == metrics[f"{name}:bootstrap_std"]
    assert float(table[0]["value"]) == report["score"]


def test_the_seed_makes_the_bootstrap_reproducible(db, tmp_path):
    import_fixture("mixed", tmp_path)
    first, again, other = report_json("mixed"), report_json("mixed", "--seed", "0"), report_json("mixed", "--seed", "1")
    assert first == again
    assert first["metrics"]["overall_score"] == other["metrics"]["overall_score"]
    assert first["metrics"]["overall_score:bootstrap_std"] != other["metrics"]["overall_score:bootstrap_std"]


def test_out_writes_the_report_to_a_file(db, tmp_path):
    import_fixture("mixed", tmp_path)
    path = tmp_path / "report.json"
    call_command("run_report", "mixed", "--out", str(path), stdout=StringIO(), stderr=StringIO())
    assert json.loads(path.read_text()) == report_json("mixed")


def test_an_unknown_run_is_an_error(db):
    with pytest.raises(CommandError, match="no run named 'nope'"):
        call_command("run_report", "nope", stdout=StringIO())


def test_a_run_recorded_before_the_shared_bootstrap_keeps_its_numbers(db, tmp_path):
    run = import_fixture("mixed", tmp_path)
    assert run.bootstrap == Run.Bootstrap.ONE_DRAW  # every new run
    # The migration gives the runs already recorded the per-metric draw they were reported with.
    assert Run._meta.get_field("bootstrap").db_default == Run.Bootstrap.PER_METRIC
    shared = run_report(run=run).data
    Run.objects.filter(id=run.id).update(bootstrap=Run.Bootstrap.PER_METRIC)
    run.refresh_from_db()
    old = run_report(run=run).data
    expected = scoring.reference_summary(scoring.aggregate(load("mixed")["reference_response_metrics"], seed=0))
    expected.pop("score")
    assert old["metrics"] == pytest.approx(expected, abs=1e-12)
    assert {k: v for k, v in shared["metrics"].items() if not k.endswith(":bootstrap_std")} == {
        k: v for k, v in old["metrics"].items() if not k.endswith(":bootstrap_std")
    }
    assert shared["metrics"]["overall_score:bootstrap_std"] != old["metrics"]["overall_score:bootstrap_std"]


def test_a_run_recorded_with_the_multinomial_draw_per_set_keeps_its_numbers(db, tmp_path):
    # Runs recorded between issues 27 and 32 keep the draws they were reported with: the one
    # draw has the same distribution, but other random numbers.
    run = import_fixture("mixed", tmp_path)
    one_draw = run_report(run=run).data
    Run.objects.filter(id=run.id).update(bootstrap=Run.Bootstrap.MULTINOMIAL)
    run.refresh_from_db()
    report = run_report(run=run).data
    columns = scoring.score_grades(**run_grades_get(run=run).score_arrays())["metrics"]
    expected = scoring.aggregate_columns(columns, seed=0, method=scoring.MULTINOMIAL)
    assert {k: v for k, v in report["metrics"].items() if not k.startswith("score")} == expected
    assert report["bootstrap"]["method"] == "multinomial"
    assert report["metrics"]["overall_score:bootstrap_std"] != one_draw["metrics"]["overall_score:bootstrap_std"]


def test_a_run_recorded_with_the_poisson_bootstrap_keeps_its_numbers(db, tmp_path):
    run = import_fixture("mixed", tmp_path)
    Run.objects.filter(id=run.id).update(bootstrap=Run.Bootstrap.SHARED)
    run.refresh_from_db()
    report = run_report(run=run).data
    per_response = load("mixed")["reference_response_metrics"]
    names = sorted({name for metrics in per_response for name in metrics})
    columns = {name: np.array([m.get(name, np.nan) for m in per_response]) for name in names}
    expected = scoring.aggregate_columns(columns, seed=0, method=scoring.SHARED)
    assert {k: report["metrics"][k] for k in expected} == pytest.approx(expected, abs=1e-12)
    assert report["bootstrap"]["method"] == "shared"
