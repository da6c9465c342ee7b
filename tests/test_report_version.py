"""A stored report's version is derived from what builds it (grading.reports.stored's
document_version): a key added to the report without its schema fails here, and a key added
with it reaches a finished run whose report was already stored."""

import pytest
from django.core.cache import cache

from grading.metaeval import report as metaeval_report
from grading.models import Run, StoredReport
from grading.reports import report as run_reports
from grading.reports import stored
from tests.grading_data import imported_run

pytestmark = pytest.mark.django_db


def test_every_key_of_the_run_report_is_in_its_schema():
    run = imported_run(conversations=2, samples=2)
    data = run_reports.run_report(run=run).data
    assert stored.document_keys(data, nested=("counts",)) == run_reports.REPORT_SCHEMA


def test_every_key_of_a_length_adjusted_report_is_in_its_schema():
    run = imported_run(conversations=2, samples=2)
    Run.objects.filter(id=run.id).update(length_adjusted=True)
    run.refresh_from_db()
    data = run_reports.run_report(run=run).data
    assert stored.document_keys(data, nested=("counts",)) == run_reports.REPORT_SCHEMA


def test_every_key_of_the_meta_eval_document_is_in_its_schema():
    run = imported_run(conversations=2, samples=1)
    document = metaeval_report.run_meta_eval_report(run=run)
    assert stored.document_keys(document, nested=("coverage", "settings")) == metaeval_report.META_EVAL_SCHEMA


def test_the_version_follows_the_schema_and_the_builder():
    schema = run_reports.REPORT_SCHEMA
    version = stored.document_version("run-report", 4, schema)
    assert stored.document_version("run-report", 4, schema) == version
    assert stored.document_version("run-report", 4, (*schema, "bootstrap")) != version
    assert stored.document_version("run-report", 5, schema) != version
    assert run_reports.report_cache_key(run=imported_run(conversations=1, samples=1), seed=0).startswith(
        run_reports.REPORT_VERSION
    )


def test_a_new_key_reaches_a_finished_run_whose_report_was_stored(monkeypatch):
    run = imported_run(conversations=2, samples=1)
    assert "extra" not in run_reports.run_report_cached(run=run).data
    compute = run_reports._report_data

    def with_extra(*args, **kwargs):
        return {**compute(*args, **kwargs), "extra": 1}

    # What adding a metric is: the builder gains a key, and the schema names it.
    monkeypatch.setattr(run_reports, "_report_data", with_extra)
    schema = (*run_reports.REPORT_SCHEMA, "extra")
    monkeypatch.setattr(
        run_reports, "REPORT_VERSION", stored.document_version("run-report", run_reports.REPORT_BUILDER, schema)
    )
    cache.clear()
    assert run_reports.run_report_cached(run=Run.objects.get(id=run.id)).data["extra"] == 1
    assert run_reports.run_report_data_cached(run=Run.objects.get(id=run.id))["extra"] == 1
    assert StoredReport.objects.filter(run=run, kind=StoredReport.Kind.REPORT).count() == 2
