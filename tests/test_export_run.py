"""export_run: a run as a simple-evals results file, and back.

The round trip import_run(export_run(run)) must give the same report, and the means in the
file must be what an aggregation of its own examples gives: our plain-Python computation
always, and the reference's `_aggregate_get_clipped_mean` too when simple-evals is at hand
($SIMPLE_EVALS_DIR: a checkout or a bare git mirror, as for the benches).
"""

import json
import sys
from collections import defaultdict
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Conversation, Physician
from grading.models import Grade, Response, Run
from grading.reports.report import run_report
from grading.reports.results_file import parse_results
from tests import healthbench_rows as rows
from tests.grading_data import imported_run
from tests.simple_evals import simple_evals_dir
from tests.test_import_run import graded_row, import_dataset, import_run, write_results
from tests.test_report_pages import make_user
from tests.test_run_report import import_fixture

pytestmark = pytest.mark.django_db


def export(name: str, tmp_path) -> dict:
    out = tmp_path / f"{name}_allresults.json"
    call_command("export_run", name, out=out, stderr=StringIO())
    return json.loads(out.read_text())


def comparable(data: dict) -> dict:
    # An import reuses nothing, and knows no "missing" grade: its file is the whole rubric.
    return {k: v for k, v in data.items() if k != "reused"}


def test_importing_the_export_gives_an_identical_report(tmp_path):
    original = import_fixture("mixed", tmp_path)
    path = tmp_path / "again_allresults.json"
    call_command("export_run", "mixed", out=path, stderr=StringIO())
    import_run(path, name="again")
    assert comparable(run_report(run=Run.objects.get(name="again")).data) == comparable(run_report(run=original).data)


def test_a_failed_grade_and_the_length_adjustment_survive_the_round_trip(tmp_path):
    run = imported_run(conversations=4, samples=2)
    Run.objects.filter(pk=run.pk).update(healthbench_professional=True, length_centre=30, length_penalty=0.1)
    run.refresh_from_db()
    grade = Grade.objects.filter(run=run).order_by("id").first()
    Grade.objects.filter(pk=grade.pk).update(status=Grade.Status.FAILED, met=None)
    document = export(run.name, tmp_path)
    failed = [
        e
        for e in document["metadata"]["example_level_metadata"]
        if any(i["criteria_met"] is None for i in e["rubric_items"])
    ]
    assert len(failed) == 1
    assert failed[0]["score"] is None
    assert failed[0]["length_adjusted_score"] is None
    assert document["metadata"]["length_adjustment"] == {"centre": 30, "penalty_per_500": 0.1}
    import_run(tmp_path / f"{run.name}_allresults.json", name="again")
    again = Run.objects.get(name="again")
    assert again.scores_length_adjusted
    assert (again.length_centre, again.length_penalty) == (30, 0.1)
    assert comparable(run_report(run=again).data) == comparable(run_report(run=run).data)


def test_each_example_holds_what_the_reference_writes(tmp_path):
    run = imported_run(conversations=2, samples=1, n_criteria=3)
    Run.objects.filter(pk=run.pk).update(length_adjusted=True)
    document = export(run.name, tmp_path)
    assert list(document) == ["score", "metrics", "htmls", "convos", "metadata"]
    example = document["metadata"]["example_level_metadata"][0]
    conversation = Conversation.objects.get(prompt_id=example["prompt_id"])
    assert example["prompt"] == conversation.messages
    assert example["completion"][0]["role"] == "assistant"
    assert document["convos"][0] == example["prompt"] + example["completion"]
    assert [set(i) for i in example["rubric_items"]] == [
        {"criterion", "points", "tags", "criteria_met", "explanation"}
    ] * 3
    # Without a stored completion id, the reference's own: sha256(prompt_id + completion).
    assert len(example["completion_id"]) == 64
    text = example["completion"][0]["content"]
    assert example["length_adjusted_score"] == pytest.approx(example["score"] - 0.0147 * (len(text) - 2000) / 500)
    assert "overall_score_length_adjusted" in document["metrics"]
    assert document["metrics"]["score:n_samples"] == document["metrics"]["overall_score:n_samples"]
    assert len(parse_results(json.dumps(document).encode())) == 2


# --- the file's means against aggregations of its own examples ------------------------------


def example_metrics(example: dict, example_tags: list[str], score_fn) -> dict[str, float] | None:
    """Per-example metrics as the reference's grade_sample builds them; None if a grade failed."""
    items = example["rubric_items"]
    if any(i["criteria_met"] is None for i in items):
        return None
    overall = score_fn(items)
    metrics = {"overall_score": overall, **dict.fromkeys(example_tags, overall)}
    by_tag: dict[str, list[dict]] = defaultdict(list)
    for item in items:
        for tag in item["tags"]:
            by_tag[tag].append(item)
    for tag, tagged in by_tag.items():
        score = score_fn(tagged)
        if score is not None:
            metrics[tag] = score
    return metrics


def plain_score(items: list[dict]) -> float | None:
    possible = sum(i["points"] for i in items if i["points"] > 0)
    if possible == 0:
        return None
    return sum(i["points"] for i in items if i["criteria_met"]) / possible


def per_example(document: dict, score_fn) -> list[dict[str, float]]:
    tags = dict(Conversation.objects.values_list("prompt_id", "example_tags"))
    out = []
    for example in document["metadata"]["example_level_metadata"]:
        metrics = example_metrics(example, tags[example["prompt_id"]], score_fn)
        if metrics is not None:
            out.append(metrics)
    return out


def means_of(metrics: dict) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if ":n_samples" not in k and ":bootstrap_std" not in k}


def test_the_files_means_equal_a_plain_aggregation_of_its_examples(tmp_path):
    import_fixture("mixed", tmp_path)
    document = export("mixed", tmp_path)
    columns: dict[str, list[float]] = defaultdict(list)
    for metrics in per_example(document, plain_score):
        for name, value in metrics.items():
            columns[name].append(value)
    expected = {name: min(1.0, max(0.0, sum(v) / len(v))) for name, v in columns.items()}
    got = means_of(document["metrics"])
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-9), name
        assert document["metrics"][f"{name}:n_samples"] == len(columns[name])
    assert document["score"] == pytest.approx(expected["overall_score"], abs=1e-9)


def test_the_references_own_aggregation_of_the_file_gives_the_same_means(tmp_path):
    reference_dir = str(simple_evals_dir())
    from bench.scoring_bench import load_reference

    before = set(sys.modules)
    loaded = load_reference(reference_dir)
    module = sys.modules.get("simple_evals_reference.healthbench_eval")
    # The loader stubs modules the reference imports but does not need (pandas, blobfile, ...):
    # take them out again, or a later test importing the real library would find the stub.
    for name in set(sys.modules) - before:
        del sys.modules[name]
    if loaded is None or module is None:
        # Asked for by name: a reference that does not load is a failure, not a reason to skip.
        pytest.fail(f"SIMPLE_EVALS_DIR={reference_dir} is set but simple-evals could not be loaded from it")
    aggregate, SingleEvalResult = loaded

    def reference_score(items: list[dict]) -> float | None:
        rubric = [module.RubricItem(i["criterion"], i["points"], i["tags"]) for i in items]
        return module.calculate_score(rubric, items)

    import_fixture("mixed", tmp_path)
    document = export("mixed", tmp_path)
    results = [SingleEvalResult(score=m["overall_score"], metrics=m) for m in per_example(document, reference_score)]
    theirs = aggregate(results)
    assert theirs.score == pytest.approx(document["score"], abs=1e-9)
    ours = means_of(document["metrics"])
    assert set(means_of(theirs.metrics)) == set(ours)
    for name, value in means_of(theirs.metrics).items():
        assert ours[name] == pytest.approx(float(value), abs=1e-9), name


# --- command and page -----------------------------------------------------------------------


def test_it_names_an_unknown_run():
    with pytest.raises(CommandError, match="no run named 'nope'"):
        call_command("export_run", "nope")


def test_it_warns_about_grades_a_run_never_made(tmp_path):
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    # A cancelled re-grade: its plan is the source's six items, of which it made five.
    run = Run.objects.create(
        plan=Run.Plan.SOURCE_RUN, name="cancelled", status=Run.Status.CANCELLED, responses_from=source
    )
    for grade in Grade.objects.filter(run=source).order_by("id")[1:]:
        grade.pk, grade.run = None, run
        grade.save()
    err = StringIO()
    call_command("export_run", run.name, out=tmp_path / "x.json", stderr=err)
    assert "1 grade(s)" in err.getvalue()
    assert "never made" in err.getvalue()


def test_the_report_page_offers_the_file_and_the_download_is_the_commands(client, tmp_path):
    run = imported_run(conversations=2, samples=1, n_criteria=3)
    client.force_login(make_user(Physician.Role.RESEARCHER))
    url = reverse("report_results", args=[run.code])
    assert url in client.get(reverse("report_detail", args=[run.code])).content.decode()
    response = client.get(url)
    assert response["Content-Disposition"] == f'attachment; filename="{run.name}_allresults.json"'
    out = StringIO()
    call_command("export_run", run.name, stdout=out)
    assert response.content.decode() == out.getvalue().rstrip("\n")


def test_physicians_cannot_download_a_run(client):
    run = imported_run(conversations=1, samples=1, n_criteria=2)
    client.force_login(make_user(Physician.Role.PHYSICIAN))
    assert client.get(reverse("report_results", args=[run.code])).status_code == 403


# --- what came in goes back out ---------------------------------------------------------------


def test_an_imported_file_comes_back_byte_for_byte_but_for_the_scores_it_recomputes(tmp_path):
    first, second = rows.row("p-1"), rows.row("p-2", theme="emergency_referrals")
    import_dataset(tmp_path, first, second)
    sent = graded_row(first, [True, False, False], completion="Rest and fluids.")
    # The conversation as the reference's sampler sent it: its system message first.
    sent["prompt"] = [{"content": "You are a helpful assistant.", "role": "system"}, *first["prompt"]]
    # Zero cached and reasoning tokens stay zeros, and a field the product does not know stays put.
    sent["usage"] = {
        "input_tokens": 120,
        "input_cached_tokens": 0,
        "output_tokens": 45,
        "output_reasoning_tokens": 0,
        "total_tokens": 165,
    }
    sent["sampler"] = {"model": "gpt-4.1", "note": ["kept", 1]}
    same = graded_row(second, [True, True, False], completion="Call an ambulance now.")
    same["prompt"] = second["prompt"]  # the dataset's conversation: stored once, written back equal
    del same["usage"]  # a file without usage gets none back
    path = write_results(tmp_path / "in_allresults.json", [sent, same])
    import_run(path, name="imported")
    examples = export("imported", tmp_path)["metadata"]["example_level_metadata"]
    # Only the scores differ: the file said null, the product writes what its grades give.
    assert [e["score"] for e in examples] == [pytest.approx(6 / 14), pytest.approx(14 / 14)]
    for given, exported in zip([sent, same], examples, strict=True):
        assert json.dumps(exported) == json.dumps({**given, "score": exported["score"]})
    stored = (
        Response.objects.filter(grades__run__name="imported", conversation__prompt_id="p-2").distinct().get().parameters
    )
    assert "prompt" not in json.loads(stored["imported"])
