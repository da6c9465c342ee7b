"""A run's calibration sample, end to end on the demo: drawn by command, labelled by physicians
through the usual labelling service, reported as the calibrated score (issue 31)."""

import csv
import io
import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.models import Assignment, Conversation, Physician
from annotation.services.labels import label_record
from annotation.task_kinds.rubric import writers as rubric_writers
from grading.calibration.population import grader_scores
from grading.calibration.ppi import ppi_mean
from grading.calibration.report import calibration_csv, calibration_report, physician_scores
from grading.calibration.sample import SampleError, allocate, calibration_sample_draw, draw
from grading.models import CalibrationItem, CalibrationSample, Grade, Run
from tests.people import person

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_run() -> Run:
    call_command("load_demo", password="pw-demo", stdout=StringIO())
    return Run.objects.get(name="demo-run")


def _report(run: Run) -> dict:
    data = calibration_report(run)
    assert data is not None
    return data


def _command(*args: str) -> str:
    out = StringIO()
    call_command("calibrate", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_allocation_is_proportional_and_whole():
    assert allocate({"a": 50, "b": 30, "c": 20}, 10) == {"a": 5, "b": 3, "c": 2}
    assert sum(allocate({"a": 7, "b": 7, "c": 7}, 10).values()) == 10
    assert allocate({"a": 1, "b": 99}, 10) == {"a": 0, "b": 10}


def test_the_same_seed_draws_the_same_responses_and_strata_keep_their_share():
    population = {"theme:a": list(range(100, 160)), "theme:b": list(range(200, 240))}
    first = draw(population, 20, seed=7, by_theme=False)
    assert first == draw(population, 20, seed=7, by_theme=False)
    assert first != draw(population, 20, seed=8, by_theme=False)
    assert len({rid for rid, _ in first}) == 20
    stratified = draw(population, 20, seed=7, by_theme=True)
    assert sum(stratum == "theme:a" for _, stratum in stratified) == 12
    assert all((rid < 200) == (stratum == "theme:a") for rid, stratum in stratified)


def test_sample_by_command_gives_each_response_whole_to_a_physician(demo_run):
    printed = _command("sample", "demo-run", "--n", "6", "--seed", "7")
    assert "drew 6 responses of demo-run (seed 7)" in printed
    sample = CalibrationSample.objects.get(run=demo_run)
    assert (sample.size, sample.seed, sample.by_theme) == (6, 7, False)
    response_ids = set(sample.items.values_list("response_id", flat=True))
    assert len(response_ids) == 6
    tasks = Assignment.objects.filter(kind=Assignment.Kind.LABEL, response_id__in=response_ids)
    for rid in response_ids:
        graded = set(Grade.objects.filter(run=demo_run, response_id=rid).values_list("criterion_id", flat=True))
        physicians = set(tasks.filter(response_id=rid).values_list("physician_id", flat=True))
        # Every criterion the run graded, for the same physician(s), and nobody who wrote the rubric.
        for pid in physicians:
            assert set(tasks.filter(response_id=rid, physician_id=pid).values_list("criterion_id", flat=True)) >= graded
        conversation = Conversation.objects.get(responses__id=rid)
        assert not physicians & rubric_writers([conversation.id]).get(conversation.id, set())
        assert physicians
    # A sample is frozen: never redrawn, by command or service.
    with pytest.raises(CommandError, match="never redrawn"):
        _command("sample", "demo-run", "--n", "6", "--seed", "8")
    assert CalibrationItem.objects.filter(sample=sample).count() == 6


def test_refusals_say_why(demo_run):
    with pytest.raises(SampleError, match="between 2 and"):
        calibration_sample_draw(run=demo_run, size=1, seed=1)
    with pytest.raises(SampleError, match="scored responses"):
        calibration_sample_draw(run=demo_run, size=1999, seed=1)
    demo_run.status = Run.Status.RUNNING
    demo_run.save(update_fields=["status"])
    with pytest.raises(SampleError, match="once the run has finished"):
        calibration_sample_draw(run=demo_run, size=5, seed=1)
    with pytest.raises(CommandError, match="no run named"):
        _command("status", "no-such-run")
    with pytest.raises(CommandError, match="has no calibration sample"):
        _command("report", "demo-run")


def _label_everything(run: Run, *, agree_with_grader: bool) -> None:
    """Each open labelling task of the sample answered: as the grader did, or the opposite."""
    grades = {(g.response_id, g.criterion_id): bool(g.met) for g in Grade.objects.filter(run=run)}
    sample_ids = CalibrationSample.objects.get(run=run).items.values("response_id")
    for task in Assignment.objects.filter(
        kind=Assignment.Kind.LABEL, status=Assignment.Status.OPEN, response_id__in=sample_ids
    ):
        met = grades[(task.response_id or 0, task.criterion_id)]
        label_record(task=task, met=met if agree_with_grader else not met)


def test_report_from_physician_labels(demo_run):
    person("physician3", Physician.Role.PHYSICIAN)
    _command("sample", "demo-run", "--n", "8", "--seed", "3", "--physicians", "2")
    assert "0 of 8 responses scored" in _command("status", "demo-run")
    _label_everything(demo_run, agree_with_grader=True)
    data = _report(demo_run)
    assert data["progress"] == {"sampled": 8, "labelled": 8, "complete": True}
    graded = grader_scores(demo_run)
    by_id = graded.by_id()
    sample = CalibrationSample.objects.get(run=demo_run)
    scores = physician_scores(sample)
    # Physicians who agree with every grade give each response the grader's own clipped score.
    for rid, found in scores.items():
        assert found == pytest.approx([by_id[rid][0]] * len(found))
    pairs = [(float(np.mean(scores[rid])), by_id[rid][0]) for rid in sample.items.values_list("response_id", flat=True)]
    estimate, se, lam = ppi_mean([p for p, _ in pairs], [g for _, g in pairs], graded.scores)
    overall = data["overall"]
    assert (overall["estimate"], overall["se"], overall["lam"]) == (estimate, se, lam)
    assert overall["bias"] == pytest.approx(0.0)
    # Eight responses are too few for an interval: the report says so instead.
    assert overall["interval"] is None
    assert "at least 30" in overall["no_interval_reason"]
    assert data["physician_disagreement"]["responses_with_two"] == 8
    assert data["design"]["physicians_per_response"] == 2
    # JSON and CSV by command.
    assert json.loads(_command("report", "demo-run")) == json.loads(json.dumps(data))
    rows = list(csv.reader(io.StringIO(_command("report", "demo-run", "--format", "csv"))))
    assert rows[0][:4] == ["scope", "calibrated", "low", "high"]
    assert rows[1][0] == "overall"
    assert float(rows[1][1]) == pytest.approx(estimate)
    assert "8 of 8 responses scored" in _command("status", "demo-run")


def test_disagreeing_physicians_move_the_estimate_away_from_the_grader(demo_run):
    _command("sample", "demo-run", "--n", "10", "--seed", "5")
    _label_everything(demo_run, agree_with_grader=False)
    overall = _report(demo_run)["overall"]
    assert overall["bias"] != pytest.approx(0.0)
    assert overall["estimate"] != pytest.approx(overall["grader_only"])


def test_removed_physicians_labels_do_not_count(demo_run):
    _command("sample", "demo-run", "--n", "4", "--seed", "9")
    _label_everything(demo_run, agree_with_grader=True)
    Physician.objects.filter(role=Physician.Role.PHYSICIAN).update(status=Physician.Status.REMOVED)
    data = _report(demo_run)
    assert data["progress"]["labelled"] == 0
    assert data["overall"]["estimate"] is None


def test_csv_cells_never_start_a_formula():
    part = {
        "estimate": None,
        "interval": None,
        "se": None,
        "lam": None,
        "n": 0,
        "n_run": 3,
        "grader_only": 0.5,
        "grader_only_interval": None,
        "physician_only": None,
        "physician_only_interval": None,
        "bias": None,
        "effective_n": None,
        "no_interval_reason": "x",
    }
    text = calibration_csv({"overall": part, "themes": {"=HYPERLINK(1)": part}})
    assert "\n=HYPERLINK" not in text
    assert "'=HYPERLINK" in text
