"""A researcher launches a grading run in a real browser: estimate first, then launch."""

import pytest
from django.core.management import call_command

from annotation.models import Physician
from grading.models import Run
from healthbench_web.celery import app
from tests.conftest import ARTIFACTS, log_in
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.healthbench_rows import write
from tests.people import person
from tests.test_import_professional import professional_row

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def eager_tasks():
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def test_a_researcher_sees_the_estimate_then_launches_a_run(browser, live_server, llm_server):
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    endpoint_on(llm_server)
    person("res", Physician.Role.RESEARCHER)
    page = browser.new_page()
    log_in(page, live_server.url, "res", "pw-res")
    page.goto(live_server.url + "/runs/new/")
    page.fill("input[name=name]", "from-browser")
    page.check("input[name=source][value=responses]")
    page.select_option("select[name=responses_from]", label=source.name)
    page.select_option("select[name=grader]", label="test-grader")
    page.click("button[value=estimate]")
    page.wait_for_selector("button[value=launch]")
    assert "6 grader calls" in page.inner_text("main")
    assert not Run.objects.filter(name="from-browser").exists()
    page.click("button[value=launch]")
    page.wait_for_url("**/runs/*/")
    page.screenshot(path=str(ARTIFACTS / "run-launched.png"), full_page=True)
    assert "from-browser" in page.inner_text("main")
    run = Run.objects.get(name="from-browser")
    assert run.responses_from == source
    assert run.total_items == 6


def test_the_physicians_source_shows_the_subset_alone_and_launches_their_responses(
    browser, live_server, llm_server, tmp_path
):
    path = tmp_path / "pro.jsonl"
    write(path, professional_row("pro-1"), professional_row("pro-2"))
    call_command("import_healthbench", path, "--subset", "pro")
    endpoint_on(llm_server)
    person("res", Physician.Role.RESEARCHER)
    page = browser.new_page()
    log_in(page, live_server.url, "res", "pw-res")
    page.goto(live_server.url + "/runs/new/")
    page.fill("input[name=name]", "physicians")
    page.check("input[name=source][value=physician]")
    assert page.locator("#id_subset").is_visible()
    for hidden in ("#id_policy", "#id_samples", "#id_responses_from", "#id_rubric_changes"):
        assert not page.locator(hidden).is_visible(), hidden
    page.check("input[name=source][value=sample]")
    assert page.locator("#id_subset").is_visible()
    assert page.locator("#id_policy").is_visible()
    page.check("input[name=source][value=physician]")
    page.select_option("select[name=subset]", label="pro")
    page.select_option("select[name=grader]", label="test-grader")
    page.click("button[value=estimate]")
    page.wait_for_selector("button[value=launch]")
    assert "6 grader calls" in page.inner_text("main")
    page.click("button[value=launch]")
    page.wait_for_url("**/runs/*/")
    assert "the physicians' responses on pro" in page.inner_text("main")
    run = Run.objects.get(name="physicians")
    assert (run.physician_responses, run.policy_model, run.total_items) == (True, "physician", 6)
