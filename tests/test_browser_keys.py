"""Small keyboard and focus slips, fixed, in Chromium on the demo programme (`load_demo`).

`t` works at the end of a ballot (where the focus is on the *Next task* link); after *Edit* and
*Add* in the rubric editor the focus is on the text field, and a failed add is announced; the
endpoint form's errors take the focus; every page names an icon; `/api/docs/` passes axe-core.
"""

import pytest

from annotation.models import Assignment
from tests.browser_walk import WIDTHS, browser_marks

pytest_plugins = ["tests.browser_walk"]
pytestmark = browser_marks


def _task(username: str, kind: str) -> Assignment:
    task = (
        Assignment.objects.filter(physician__user__username=username, kind=kind, status=Assignment.Status.OPEN)
        .select_related("conversation")
        .order_by("id")
        .first()
    )
    assert task is not None, (username, kind)
    return task


def _announced(page, words: str) -> None:
    page.wait_for_function("w => document.getElementById('announce').textContent.includes(w)", arg=words)


def test_t_goes_to_the_next_task_at_the_end_of_a_ballot(visit):
    task = _task("physician", Assignment.Kind.CONSENSUS_VOTE)
    physician = visit("physician", 1366)
    page = physician.go(f"/conversations/{task.conversation.code}/votes/")
    rows = page.locator(".ballot-row").count()
    assert rows
    for row in range(rows):
        page.keyboard.press("a")
        page.wait_for_selector(f"#vote-progress:has-text('{row + 1} of {rows} voted')")
    assert "Next task" in physician.wait_focus("a[data-next-task]")
    target = page.get_attribute("a[data-next-task]", "href")
    assert target
    page.keyboard.press("t")
    page.wait_for_url(lambda url: url.endswith(target))
    # Other single keys still do nothing on a link (WCAG 2.1.4): `a` on the next page's links is not a vote.


def test_other_keys_do_nothing_on_the_next_task_link(visit):
    task = _task("physician", Assignment.Kind.CONSENSUS_VOTE)
    physician = visit("physician", 1366)
    page = physician.go(f"/conversations/{task.conversation.code}/votes/")
    rows = page.locator(".ballot-row").count()
    for row in range(rows):
        page.keyboard.press("d")
        page.wait_for_selector(f"#vote-progress:has-text('{row + 1} of {rows} voted')")
    physician.wait_focus("a[data-next-task]")
    before = page.url
    page.keyboard.press("a")
    page.wait_for_timeout(300)
    assert page.url == before
    assert page.locator("button[value=no][aria-pressed=true]").count() == rows


def test_the_rubric_editor_keeps_the_focus_on_the_text_and_announces_a_failed_add(visit):
    task = _task("physician", Assignment.Kind.RUBRIC)
    physician = visit("physician", 1366)
    page = physician.go(f"/conversations/{task.conversation.code}/rubric/")
    page.fill("#id_new_text", "Advises calling emergency services now.")
    page.click("#add-criterion button[type=submit]")
    # A failed add is said, with what to fix.
    _announced(page, "Criterion not added:")
    assert "Give points from -10 to 10." in page.inner_text("#announce")
    physician.wait_focus("#id_new_points")
    page.fill("#id_new_points", "7")
    page.select_option("#id_new_axis", "completeness")
    page.click("#add-criterion button[type=submit]")
    page.wait_for_selector("#criteria li:has-text('Advises calling emergency services now.')")
    # After Add, the empty form's text field: the next criterion is written there.
    physician.wait_focus("#id_new_text")
    physician.check("added")
    added = page.locator("#criteria > li", has_text="Advises calling emergency services now.")
    added.get_by_role("link", name="Edit").click()
    # After Edit, the criterion's own text field, not the list item.
    focused = physician.wait_focus("#criteria li.editing textarea[name=text]")
    assert "Advises calling emergency services now." in focused
    physician.check("editing")


def test_the_endpoint_form_errors_take_the_focus(visit):
    curator = visit("curator", 1366)
    page = curator.go("/endpoints/new/")
    page.fill("#id_name", "o-grader-focus")
    page.fill("#id_model", "o4-mini")
    page.check("#id_reasoning")
    page.fill("#id_temperature", "0.7")
    page.click("button:has-text('Save')")
    page.wait_for_selector(".form-errors")
    assert "Not saved" in curator.wait_focus(".form-errors")
    curator.check("errors")


@pytest.mark.parametrize("width", WIDTHS)
def test_api_docs_have_a_language_and_pass_axe_and_every_page_has_an_icon(visit, width):
    researcher = visit("researcher", width)
    page = researcher.go("/api/docs/")  # go() runs axe-core and the width check
    assert page.get_attribute("html", "lang") == "en"
    assert "/api/runs/{name}/report/" in researcher.text()
    assert page.locator("a[href='/api/schema/?format=json']").count() == 1
    icon = page.get_attribute("link[rel=icon]", "href")
    assert icon
    answer = page.request.get(researcher.base + icon)
    assert answer.status == 200
    assert "svg" in answer.headers["content-type"]
    assert page.request.get(researcher.base + "/favicon.ico").url.endswith(".svg")
