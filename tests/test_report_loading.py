"""Loading a run's grades for its report: PostgreSQL's packed columns read what a row-by-row read
reads, for every value a grade can hold, and a response's stored length follows its text."""

import numpy as np
import pytest
from django.db import connection
from django.db.models.functions import Length

from grading.models import Grade, Response
from grading.reports import scoring, selectors
from tests.test_run_report import import_fixture


def _rows(columns: selectors.GradeColumns) -> list[tuple]:
    """A loader's grades as (response, points, met, tags) rows, in one order, and its reused count."""
    response, points, met, tag_row, tag_lists, reused = columns
    rows = sorted(
        zip(response.tolist(), points.tolist(), met.tolist(), (tuple(tag_lists[t]) for t in tag_row), strict=True)
    )
    return [*rows, ("reused", reused)]


@pytest.fixture
def odd_run(db, tmp_path):
    """A golden fixture's run with grades at the edges of what packing must keep apart."""
    run = import_fixture("mixed", tmp_path)
    grades = list(Grade.objects.filter(run=run).order_by("id"))
    # Any smallint survives, not only -10..10 (an import stores what the file says).
    Grade.objects.filter(id=grades[0].id).update(points=-32768)
    Grade.objects.filter(id=grades[1].id).update(points=32767, reused=True)
    Grade.objects.filter(id=grades[2].id).update(status=Grade.Status.FAILED, met=None, reused=True)
    Grade.objects.filter(id=grades[3].id).update(points=0, met=True, tags=["axis:accuracy", "cluster:odd é"])
    return run


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the packed columns are read on PostgreSQL only")
def test_the_packed_columns_hold_what_a_row_by_row_read_holds(odd_run):
    grades = Grade.objects.filter(run=odd_run).order_by()
    packed = selectors._grade_columns_aggregated(grades)
    assert _rows(packed) == _rows(selectors._grade_columns_by_row(grades))
    assert packed[3].size == Grade.objects.filter(run=odd_run).count()
    assert {-32768.0, 32767.0} <= set(packed[1].tolist())
    assert scoring.MISSING in packed[2].tolist()
    assert packed[5] == 2
    # Tag lists are numbered by their first grade, as a row-by-row read meets them.
    first_tags = Grade.objects.filter(run=odd_run).order_by("id").values_list("tags", flat=True)[0]
    assert packed[4][0] == first_tags


def test_the_report_reads_each_response_once_with_its_length_and_flags(odd_run):
    responses = list(Response.objects.filter(grades__run=odd_run).distinct().order_by("id"))
    Response.objects.filter(id=responses[0].id).update(text="é" * 7, refused=True)
    Response.objects.filter(id=responses[1].id).update(truncated=True)
    ids = np.array([r.id for r in responses], dtype=np.int64)
    columns = selectors._response_columns(odd_run, ids)
    expected = list(
        Response.objects.filter(id__in=ids.tolist())
        .order_by("id")
        .values_list("conversation_id", Length("text"), "refused", "truncated")
    )
    assert list(
        zip(
            columns.conversation.tolist(),
            columns.length.tolist(),
            columns.refused.tolist(),
            columns.truncated.tolist(),
            strict=True,
        )
    ) == [(c, float(n), r, t) for c, n, r, t in expected]
    assert columns.length[0] == 7  # characters, not bytes
    # A running run's grades read before a response was graded: only those responses come back.
    part = selectors._response_columns(odd_run, ids[1:])
    assert part.conversation.tolist() == columns.conversation[1:].tolist()


def test_the_stored_length_follows_the_text(odd_run):
    response = Response.objects.filter(grades__run=odd_run).first()
    assert response is not None
    Response.objects.filter(id=response.id).update(text="a\u00e9\U0001f600")
    assert Response.objects.get(id=response.id).text_length == 3
