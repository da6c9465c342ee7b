"""Provider text is made storable in one place (healthbench_web/storable.py), and a run's
failure reason with a NUL still ends the run (on PostgreSQL, which refuses NUL)."""

import pytest

from grading.models import Run
from grading.pipeline.runs import run_fail
from healthbench_web.storable import RAW_ANSWER_CHARS, REASON_CHARS, storable
from tests.grading_data import imported_run


def test_it_replaces_nul_and_lone_surrogates():
    assert storable("a\x00b\ud800c\udcffd", 100) == "a\ufffdb\ufffdc\ufffdd"


def test_it_decodes_bytes_that_are_not_utf8_with_replacement():
    assert storable(b"ok \xff\xfe \xc3(", 100) == "ok \ufffd\ufffd \ufffd("


def test_it_caps_the_length_and_says_so():
    cut = storable("x" * (REASON_CHARS + 10), REASON_CHARS)
    assert len(cut) == REASON_CHARS
    assert cut.endswith("…")
    assert storable("x" * RAW_ANSWER_CHARS, RAW_ANSWER_CHARS) == "x" * RAW_ANSWER_CHARS


def test_it_keeps_ordinary_text_and_makes_none_empty():
    assert storable("Met: “yes” ✓", 100) == "Met: “yes” ✓"
    assert storable(None, 10) == ""


@pytest.mark.django_db
def test_run_fail_stores_a_reason_with_a_nul_and_bad_text_and_ends_the_run():
    run = imported_run(name="failing")
    Run.objects.filter(id=run.id).update(status=Run.Status.RUNNING)
    run_fail(run_id=run.id, error="boom \x00 \udcff " + "y" * 10_000)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("boom \ufffd \ufffd y")
    assert len(run.error) == REASON_CHARS
