"""Issue 13 walked in Chromium at 1366 and 390 px: nobody gets stuck, nothing destructive by surprise.

Each test follows one numbered case of the issue on the demo programme (`load_demo`) and
checks, on every page it visits, that the document is no wider than the viewport.
Screenshots of each role's home, editor and report pages at both widths go to
test-artifacts/workflow/ for a reviewer.
"""

import os
import re

import pytest
from django.core.management import call_command
from django.db import connections

from annotation.models import Assignment, Conversation, Physician, Subset, SubsetMember
from annotation.services.assignments import assignments_create
from grading.models import Run
from tests.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

PASSWORD = "pw-workflow"
WIDTHS = [1366, 390]
SHOTS = ARTIFACTS / "workflow"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
    ),
]


@pytest.fixture(scope="module")
def chromium():
    """One browser for the whole module: starting Chromium costs more than most of these tests."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls between browser
    # steps are plain synchronous code, so allow them.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    # ORM calls made while Playwright runs use a connection of their own; close it, or
    # PostgreSQL refuses to drop the test database at the end of the session.
    connections.close_all()


@pytest.fixture
def demo():
    call_command("load_demo", password=PASSWORD, stdout=open(os.devnull, "w"))
    return {p.user.username: p for p in Physician.objects.select_related("user")}


class Visitor:
    """One signed-in person in one browser window of a given width."""

    def __init__(self, chromium, live_server, username: str, width: int):
        self.width = width
        self.base = live_server.url
        self.username = username
        self.context = chromium.new_context(viewport={"width": width, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(10_000)
        self.page.goto(self.base + "/login/")
        self.page.fill("#id_username", username)
        self.page.fill("#id_password", PASSWORD)
        self.page.click("button[type=submit]")
        self.page.wait_for_selector(f"text=Welcome, {username}")
        self.fits()

    def go(self, path: str):
        self.page.goto(self.base + path)
        self.fits()
        return self.page

    def fits(self) -> None:
        """Nothing on the page is wider than the viewport."""
        self.page.wait_for_load_state()
        wide = self.page.evaluate("document.documentElement.scrollWidth")
        assert wide <= self.width, f"{self.page.url} is {wide} px wide in a {self.width} px window"

    def text(self, selector: str = "main") -> str:
        return self.page.inner_text(selector)

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(SHOTS / f"{self.username}-{name}-{self.width}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visit(chromium, live_server, demo):
    opened = []

    def open_as(username: str, width: int) -> Visitor:
        visitor = Visitor(chromium, live_server, username, width)
        opened.append(visitor)
        return visitor

    yield open_as
    for visitor in opened:
        visitor.close()


def _assign(curator: Visitor, kind: str) -> str:
    page = curator.go("/curator/assignments/")
    page.select_option("#id_kind", "ideal_response")
    assert page.locator("#id_condition").is_visible()
    page.select_option("#id_kind", kind)
    # What the physician is shown applies to ideal responses only: hidden for other kinds.
    assert not page.locator("#id_condition").is_visible()
    page.fill("#id_per_item", "2")
    page.click("#assign-form button[type=submit]")
    page.wait_for_selector("#preview form button")
    curator.fits()
    page.click("#preview form button")
    page.wait_for_selector("#messages li")
    curator.fits()
    return curator.text("#messages")


@pytest.mark.parametrize("width", WIDTHS)
def test_1_a_physician_is_never_left_with_an_impossible_labeling_task(visit, width):
    curator = visit("curator", width)
    assert "tasks created" in _assign(curator, "label")
    message = _assign(curator, "rubric")
    assert "open labeling tasks of the new rubric writers were withdrawn" in message
    assert "Withdrawn tasks" in curator.text()

    physician = visit("physician", width)
    physician.go("/")
    labels = physician.text("#tasks-label")
    assert "Nothing assigned." in labels and "Start labeling" not in labels
    assert "taken off your list" in labels
    physician.shot("home")
    physician.go("/labels/")
    assert "Nothing left to label" in physician.text()

    # The other order: labeling after the rubric says per conversation who was skipped and why.
    message = _assign(curator, "label")
    assert "0 tasks created" in message
    assert re.search(r"skipped physician and physician2, who wrote or write its rubric", message)


@pytest.mark.parametrize("width", WIDTHS)
def test_2_refusals_are_pages_of_the_site_that_say_why(visit, width):
    physician = visit("physician", width)
    page = physician.go("/curator/subsets/")
    assert "You cannot do this here" in physician.text()
    assert "This page is not open to your role." in physician.text()
    assert page.locator("header.top .brand").is_visible()
    physician.go("/labels/00000000-0000-4000-8000-000000000000/")
    assert "You have no such labeling item" in physician.text()
    # A refused htmx request shows the refusal page too, instead of seeming to do nothing.
    page = physician.go("/")
    page.evaluate("htmx.ajax('GET', '/curator/subsets/', {target: '#messages'})")
    page.wait_for_selector("text=You cannot do this here")
    assert page.locator("header.top nav").is_visible()
    physician.fits()

    researcher = visit("researcher", width)
    page = researcher.go("/metaeval/")
    page.click("text=Compare the ticked runs")
    page.wait_for_selector("#messages li")
    researcher.fits()
    assert page.url.endswith("/metaeval/")
    assert "Tick at least one run to compare" in researcher.text()


@pytest.mark.parametrize("width", WIDTHS)
def test_3_the_new_run_form_shows_errors_beside_fields_and_only_fields_that_apply(visit, width):
    researcher = visit("researcher", width)
    page = researcher.go("/runs/new/")
    assert page.locator("#id_responses_from").is_visible()
    assert not page.locator("#id_policy").is_visible()
    researcher.shot("editor")
    page.fill("#id_name", "")
    page.click("button[value=estimate]")
    page.wait_for_selector(".form-errors")
    researcher.fits()
    grader = page.locator(".field", has=page.locator("#id_grader"))
    assert "This field is required." in grader.inner_text()
    assert "see the messages beside them" not in researcher.text()
    page.check("input[name=source][value=sample]")
    assert page.locator("#id_policy").is_visible()
    assert not page.locator("#id_responses_from").is_visible()
    researcher.fits()


@pytest.mark.parametrize("width", WIDTHS)
def test_4_the_sign_check_catches_harmful_advice_and_leaves_real_negative_criteria_alone(visit, demo, width):
    conversation = Conversation.objects.order_by("id").first()
    assignments_create(
        kind=Assignment.Kind.RUBRIC,
        conversation_ids=[conversation.id],
        physicians=[demo["physician"]],
        per_item=1,
        assigned_by=None,
    )
    physician = visit("physician", width)
    page = physician.go(f"/conversations/{conversation.code}/rubric/")
    for text, points in [
        ("Recommends waiting to see if the pain passes.", "8"),
        ("Suggests treating the symptoms as indigestion and taking an antacid.", "-10"),
    ]:
        page.fill("#id_new_text", text)
        page.fill("#id_new_points", points)
        page.select_option("#id_new_axis", "accuracy")
        page.click("#add-criterion button[type=submit]")
        page.wait_for_selector(f"#criteria li:has-text('{text[:30]}')")
    physician.fits()
    harmful = page.locator("#criteria li", has_text="Recommends waiting to see")
    assert "harmful advice" in harmful.inner_text()
    negative = page.locator("#criteria li", has_text="treating the symptoms as indigestion")
    assert negative.locator(".warning").count() == 0
    physician.shot("editor")


@pytest.mark.parametrize("width", WIDTHS)
def test_5_subset_changes_preview_confirm_and_undo(visit, width):
    hard = Subset.objects.create(name="hard", kind=Subset.Kind.HARD)
    SubsetMember.objects.bulk_create([SubsetMember(subset=hard, conversation=c) for c in Conversation.objects.all()])
    before = list(hard.members.order_by("id").values_list("conversation_id", flat=True))
    curator = visit("curator", width)
    page = curator.go("/curator/subsets/hard/")
    page.select_option("#id_runs", "demo-run")
    page.fill("#id_n", "3")
    page.click("#hard-build button[type=submit]")
    page.wait_for_selector("#preview")
    curator.fits()
    assert f"remove {len(before) - 3}" in curator.text("#preview")
    assert hard.members.count() == len(before)  # nothing happened yet
    curator.shot("editor")
    page.click("#confirm")
    page.wait_for_selector("#messages li")
    assert hard.members.count() == 3
    assert "You can undo this until the next freeze" in curator.text("#messages")
    page.click("#undo")
    page.wait_for_selector("#messages li")
    curator.fits()
    assert list(hard.members.order_by("id").values_list("conversation_id", flat=True)) == before

    Subset.objects.create(name="empty")
    page = curator.go("/curator/subsets/empty/")
    assert page.locator("#freeze").count() == 0 and "Add conversations before freezing" in curator.text()
    first = Conversation.objects.order_by("id").first()
    page.fill("#id_prompt_ids", f"{first.prompt_id}\nno-such-prompt")
    page.click("form[action$='/pick/'] button")
    page.wait_for_selector("#messages li")
    curator.fits()
    assert "1 added, 0 removed" in curator.text("#messages")
    assert "Not found, so left out: no-such-prompt." in curator.text("#messages")


@pytest.mark.parametrize("width", WIDTHS)
def test_6_back_after_labeling_shows_the_answer_just_given(visit, demo, width):
    conversations = list(Conversation.objects.order_by("id").values_list("id", flat=True)[:2])
    assignments_create(
        kind=Assignment.Kind.LABEL,
        conversation_ids=conversations,
        physicians=[demo["physician"]],
        per_item=1,
        assigned_by=None,
    )
    total = Assignment.objects.filter(kind=Assignment.Kind.LABEL).count()
    physician = visit("physician", width)
    page = physician.go("/labels/")
    first_url = page.url
    page.click("button[value=yes]")
    page.wait_for_url(lambda url: url != first_url)
    page.wait_for_selector(f".label-progress:has-text('1 of {total} labeled')")
    physician.shot("label")
    page.go_back()
    page.wait_for_url(first_url)
    page.wait_for_selector(".label-progress:has-text('you labeled this item met')")
    physician.fits()
    assert f"1 of {total} labeled" in physician.text(".label-progress")
    assert "chosen" in (page.get_attribute("button[value=yes]", "class") or "")


@pytest.mark.parametrize("width", WIDTHS)
def test_7_tasks_and_members_show_context_and_criteria_their_author(visit, demo, width):
    conversation = Conversation.objects.order_by("id").first()
    assignments_create(
        kind=Assignment.Kind.CONSENSUS_VOTE,
        conversation_ids=[conversation.id],
        physicians=[demo["physician"]],
        per_item=1,
        assigned_by=None,
    )
    opening = " ".join(conversation.first_user_text().split()[:5])
    physician = visit("physician", width)
    physician.go("/")
    assert opening in physician.text("#tasks-consensus_vote")

    curator = visit("curator", width)
    page = curator.go("/curator/subsets/demo/")
    assert opening in curator.text("#members")
    page.click(f"#members a:has-text('{opening}')")
    page.wait_for_selector("text=Written by")
    curator.fits()
    authors = curator.text(".rubric")
    assert "dataset" in authors and "consensus" in authors
    curator.shot("home-conversation")


@pytest.mark.parametrize("width", WIDTHS)
def test_8_every_page_fits_the_window_and_the_navigation_folds_on_narrow_screens(visit, width):
    run = Run.objects.get(name="demo-run")
    curator = visit("curator", width)
    nav = curator.page.locator("header.top nav")
    if width < 900:
        assert not nav.is_visible()
        curator.page.click(".menu-toggle")
        assert nav.is_visible()
    else:
        assert nav.is_visible() and not curator.page.locator(".menu-toggle").is_visible()
    curator.shot("home")
    for path in ["/curator/consensus/", "/stats/", "/curator/subsets/", "/curator/assignments/", "/conversations/"]:
        curator.go(path)
    curator.go("/curator/consensus/")
    curator.shot("report")

    researcher = visit("researcher", width)
    researcher.shot("home")
    for path in ["/runs/", f"/runs/{run.code}/", "/reports/", "/metaeval/", f"/metaeval/report/?run={run.code}"]:
        researcher.go(path)
    researcher.go(f"/reports/{run.code}/")
    researcher.shot("report")
    assert "± bootstrap std" in researcher.text()

    physician = visit("physician", width)
    physician.go("/conversations/new/")
    physician.shot("draft")
