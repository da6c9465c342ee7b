"""A finished run's numbers are kept in the database: after a cache flush (or on another
process) they are read back, not computed again; a run that moves on is computed anew."""

import numpy as np
import pytest
from django.core.cache import cache
from django.db.models import F

from grading.metaeval import report as metaeval_report
from grading.metaeval.report import run_meta_eval_report_cached
from grading.models import Run, StoredReport
from grading.reports import report as run_reports
from grading.reports.report import run_report, run_report_cached, run_report_data_cached
from tests.grading_data import imported_run

pytestmark = pytest.mark.django_db


def _refuse(*args, **kwargs):
    raise AssertionError("computed again instead of read back")


def test_a_finished_runs_report_comes_back_from_the_database_after_a_cache_flush(monkeypatch):
    run = imported_run(conversations=3, samples=2)
    first = run_report_cached(run=run)
    assert StoredReport.objects.filter(run=run, kind=StoredReport.Kind.REPORT).count() == 1
    cache.clear()
    monkeypatch.setattr(run_reports, "run_report", _refuse)
    again = run_report_cached(run=Run.objects.get(id=run.id))
    assert again.data == first.data
    for name in ("ranked_response_ids", "ranked_scores", "ranked_status_codes"):
        np.testing.assert_array_equal(getattr(again, name), getattr(first, name))
        assert getattr(again, name).dtype == getattr(first, name).dtype
    cache.clear()
    assert run_report_data_cached(run=run) == first.data


def test_the_stored_report_is_the_computed_one(db):
    run = imported_run(conversations=2, samples=3)
    assert run_report_cached(run=run).data == run_report(run=run).data


def test_a_run_that_moved_on_is_computed_and_stored_anew(monkeypatch):
    run = imported_run(conversations=2, samples=1)
    run_report_cached(run=run)
    Run.objects.filter(id=run.id).update(report_version=F("report_version") + 1)
    run.refresh_from_db()
    calls: list[int] = []
    compute = run_reports.run_report

    def counted(**kwargs):
        calls.append(1)
        return compute(**kwargs)

    monkeypatch.setattr(run_reports, "run_report", counted)
    run_report_cached(run=run)
    assert calls == [1]
    assert StoredReport.objects.get(run=run, kind=StoredReport.Kind.REPORT).version == run.report_version


def test_a_running_runs_report_is_never_stored(db):
    run = imported_run(conversations=2, samples=1)
    Run.objects.filter(id=run.id).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    run_report_cached(run=run)
    assert not StoredReport.objects.filter(run=run).exists()


def test_the_meta_eval_document_comes_back_from_the_database(monkeypatch):
    run = imported_run(conversations=2, samples=1)
    first = run_meta_eval_report_cached(run=run)
    assert StoredReport.objects.filter(run=run, kind=StoredReport.Kind.META_EVAL).exists()
    cache.clear()
    monkeypatch.setattr(metaeval_report, "run_meta_eval_analysis_cached", _refuse)
    assert run_meta_eval_report_cached(run=run) == first
