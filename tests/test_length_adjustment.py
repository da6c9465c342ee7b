"""HealthBench Professional's length adjustment: per example, in the report, its downloads and the API.

Every figure is checked against a plain-Python computation straight from the Grade rows:
score - penalty * (len(response) - centre) / 500 per response, then the mean clipped to [0, 1].
"""

import csv
import io
import json
from collections import defaultdict

import numpy as np
import pytest
from django.core.cache import cache
from django.urls import reverse

from annotation.models import Physician
from grading.models import Grade, Run
from grading.reports import scoring
from grading.reports.report import report_csv, run_report
from tests.grading_data import imported_run
from tests.test_report_pages import make_user

pytest_plugins = ["tests.llm_server"]


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def plain_scores(run: Run) -> dict[int, tuple[float, int, str]]:
    """response id -> (score, length, theme), computed without numpy."""
    earned: dict[int, float] = defaultdict(float)
    possible: dict[int, float] = defaultdict(float)
    about: dict[int, tuple[int, str]] = {}
    for grade in Grade.objects.filter(run=run).select_related("response__conversation"):
        rid = grade.response_id
        possible[rid] += max(grade.points, 0)
        earned[rid] += grade.points if grade.met else 0
        about[rid] = (len(grade.response.text), grade.response.conversation.theme)
    return {rid: (earned[rid] / possible[rid], *about[rid]) for rid in possible if possible[rid] > 0}


def plain_adjusted_mean(values: list[tuple[float, int]], centre: float, penalty: float) -> float:
    adjusted = [score - penalty * (length - centre) / 500 for score, length in values]
    return min(1.0, max(0.0, sum(adjusted) / len(adjusted)))


def test_it_shifts_a_score_by_the_penalty_per_500_characters_from_the_centre():
    assert scoring.length_adjusted(0.5, 2000, centre=2000, penalty=0.0147) == 0.5
    assert scoring.length_adjusted(0.5, 2500, centre=2000, penalty=0.0147) == pytest.approx(0.5 - 0.0147)
    assert scoring.length_adjusted(0.5, 1000, centre=2000, penalty=0.0147) == pytest.approx(0.5 + 2 * 0.0147)
    assert np.isnan(scoring.length_adjusted(np.nan, 1000, centre=2000, penalty=0.0147))


def test_a_run_without_the_option_has_no_adjusted_metrics(db):
    run = imported_run(conversations=3)
    data = run_report(run=run).data
    assert data["length_adjustment"] is None
    assert not any(name.endswith(scoring.LENGTH_ADJUSTED) for name in data["metrics"])


@pytest.mark.parametrize("mark", ["length_adjusted", "healthbench_professional"])
def test_the_report_gives_the_adjusted_mean_of_an_independent_computation(db, mark):
    run = imported_run(conversations=6, samples=3)
    # Short demo responses sit far below 2,000 characters; a small centre puts them on both sides.
    Run.objects.filter(pk=run.pk).update(**{mark: True, "length_centre": 40, "length_penalty": 0.2})
    run.refresh_from_db()
    data = run_report(run=run).data
    per_response = plain_scores(run)
    assert data["length_adjustment"] == {"centre": 40, "penalty_per_500": 0.2}
    metrics = data["metrics"]
    everything = [(score, length) for score, length, _ in per_response.values()]
    assert metrics["overall_score_length_adjusted"] == pytest.approx(
        plain_adjusted_mean(everything, 40, 0.2), abs=1e-12
    )
    assert metrics["overall_score_length_adjusted:n_samples"] == len(everything)
    assert metrics["overall_score_length_adjusted:bootstrap_std"] > 0
    for theme in {t for _, _, t in per_response.values()}:
        values = [(s, n) for s, n, t in per_response.values() if t == theme]
        name = f"theme:{theme}_length_adjusted"
        assert metrics[name] == pytest.approx(plain_adjusted_mean(values, 40, 0.2), abs=1e-12)
        assert metrics[f"{name}:n_samples"] == len(values)
    assert any(name.startswith("axis:") and name.endswith("_length_adjusted") for name in metrics)
    assert not any(name.startswith("cluster:") and name.endswith("_length_adjusted") for name in metrics)


def test_the_csv_has_the_adjusted_score_and_names_its_constants(db):
    run = imported_run(conversations=3)
    Run.objects.filter(pk=run.pk).update(healthbench_professional=True)
    run.refresh_from_db()
    rows = {row["name"]: row for row in csv.DictReader(io.StringIO(report_csv(run_report(run=run).data)))}
    assert float(rows["overall_score_length_adjusted"]["bootstrap_std"]) >= 0
    assert rows["length_adjustment:centre"]["value"] == "2000"
    assert rows["length_adjustment:penalty_per_500"]["value"] == "0.0147"


def test_the_page_and_the_api_show_the_adjusted_score(db, client):
    run = imported_run(conversations=3)
    Run.objects.filter(pk=run.pk).update(length_adjusted=True, length_centre=40, length_penalty=0.2)
    client.force_login(make_user(Physician.Role.RESEARCHER))
    page = client.get(reverse("report_detail", args=[run.code])).content.decode()
    assert "Length-adjusted score" in page
    assert "beyond 40" in page
    api = client.get(f"/api/runs/{run.name}/report/").json()
    assert "overall_score_length_adjusted" in api["metrics"]
    assert api["length_adjustment"] == {"centre": 40, "penalty_per_500": 0.2}
    described = client.get(f"/api/runs/{run.name}/").json()
    assert described["length_adjusted"] is True
    assert described["length_centre"] == 40


def test_a_report_cached_before_the_option_changed_is_not_served(db):
    from grading.reports.report import run_report_cached

    run = imported_run(conversations=2)
    assert "overall_score_length_adjusted" not in run_report_cached(run=run).data["metrics"]
    run.length_adjusted = True
    run.save(update_fields=["length_adjusted"])
    assert "overall_score_length_adjusted" in run_report_cached(run=run).data["metrics"]


def test_json_of_the_report_holds_no_nan(db):
    run = imported_run(conversations=2)
    Run.objects.filter(pk=run.pk).update(healthbench_professional=True)
    run.refresh_from_db()
    json.dumps(run_report(run=run).data, allow_nan=False)


def test_a_run_launched_through_the_api_as_professional_reports_adjusted_scores(
    db, llm_server, django_capture_on_commit_callbacks
):
    from tests.test_api_runs import _client, _launch

    source = imported_run(conversations=2, samples=1, n_criteria=3)
    client = _client(Physician.Role.RESEARCHER)
    from healthbench_web.celery import app

    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            created = client.post(
                "/api/runs/", _launch(llm_server, source, healthbench_professional=True), format="json"
            )
    finally:
        app.conf.task_always_eager = False
    assert created.status_code == 201, created.json()
    assert created.json()["healthbench_professional"] is True
    report = client.get("/api/runs/regrade/report/").json()
    assert report["length_adjustment"] == {"centre": 2000, "penalty_per_500": 0.0147}
    assert "overall_score_length_adjusted" in report["metrics"]
