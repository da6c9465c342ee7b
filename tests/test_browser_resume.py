"""A failed or cancelled run is resumed, and its failed grades retried, from its page in Chromium:
each button shows the estimate first and asks to confirm; nothing is queued before. Every page
and state passes the axe walk (tests/browser_walk.py)."""

import pytest

from grading.models import Grade, Run
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.pipeline.runs import run_cancel
from healthbench_web.celery import app
from tests.browser_walk import WIDTHS, browser_marks
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run

pytest_plugins = ["tests.browser_walk", "tests.llm_server"]
pytestmark = [*browser_marks, pytest.mark.usefixtures("fast_retries")]


def failed_run(server) -> Run:
    """A run whose first criterion failed on every response (three unreadable answers, then the
    server answers well), ended failed as a run that hit an outage is."""
    source = imported_run(name="source", conversations=2, samples=1, n_criteria=3, faults={0: "malformed:3"})
    grader = endpoint_on(server)
    app.conf.task_always_eager = True
    try:
        run = run_launch(spec=RunRequest(name="flaky", grader=grader, responses_from=source))
    finally:
        app.conf.task_always_eager = False
    Run.objects.filter(id=run.id).update(status=Run.Status.FAILED, error="the grader endpoint went away")
    return run


@pytest.mark.parametrize("width", WIDTHS)
def test_retry_failed_grades_shows_the_estimate_then_grades_them_again(visit, llm_server, width):
    run = failed_run(llm_server)
    assert Grade.objects.filter(run=run, status=Grade.Status.FAILED).count() == 2
    researcher = visit("researcher", width)
    page = researcher.go(f"/runs/{run.code}/")
    assert "This run failed." in researcher.text()
    assert page.is_visible("#resume-run")
    page.click("#retry-failed")
    page.wait_for_selector("#resume-estimate")
    researcher.check("retry estimate")
    estimate = researcher.text("#resume-estimate")
    assert "2 grader calls: 0 grades still missing, 2 failed grades graded again" in estimate
    # Nothing happened yet: the failed grades are still there.
    assert Grade.objects.filter(run=run, status=Grade.Status.FAILED).count() == 2
    app.conf.task_always_eager = True
    try:
        page.click("#confirm-resume")
        page.wait_for_url(f"**/runs/{run.code}/")
    finally:
        app.conf.task_always_eager = False
    researcher.check("retried")
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert not Grade.objects.filter(run=run, status=Grade.Status.FAILED).exists()
    assert "Retrying the failed grades of flaky" in researcher.text()
    researcher.shot("run-retried")


def test_a_cancelled_run_is_resumed_after_its_estimate(visit, llm_server):
    source = imported_run(name="source", conversations=2, samples=1, n_criteria=3)
    run = run_launch(spec=RunRequest(name="stopped", grader=endpoint_on(llm_server), responses_from=source))
    run_cancel(run=run)
    curator = visit("curator", WIDTHS[0])
    page = curator.go(f"/runs/{run.code}/")
    assert "This run was cancelled." in curator.text()
    page.click("#resume-run")
    page.wait_for_selector("#resume-estimate")
    curator.check("resume estimate")
    assert "6 grader calls: 6 grades still missing" in curator.text("#resume-estimate")
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    app.conf.task_always_eager = True
    try:
        page.click("#confirm-resume")
        page.wait_for_url(f"**/runs/{run.code}/")
    finally:
        app.conf.task_always_eager = False
    curator.check("resumed")
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 6


def test_a_run_whose_endpoint_breaks_the_rules_is_not_offered_a_confirm(visit, llm_server):
    source = imported_run(name="source", conversations=1, samples=1, n_criteria=2)
    run = run_launch(spec=RunRequest(name="old-key", grader=endpoint_on(llm_server), responses_from=source))
    run_cancel(run=run)
    config = run.grader_config
    assert config is not None
    config.api_key_env = "OLD_KEY"
    config.save(update_fields=["api_key_env"])
    researcher = visit("researcher", WIDTHS[1])
    page = researcher.go(f"/runs/{run.code}/resume/")
    assert "It cannot be resumed yet" in researcher.text()
    assert "OLD_KEY" in researcher.text()
    assert page.locator("#confirm-resume").count() == 0
