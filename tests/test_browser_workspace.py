"""The physician workspace in a real browser (Playwright on Debian's Chromium).

A physician writes a three-criterion rubric (hitting a validation error on the way), votes and
labels with the keyboard; then a second physician's vote attaches a consensus criterion.
Screenshots are kept under test-artifacts/ (git-ignored).
"""

from pathlib import Path

import pytest
from django.db import connections

from annotation.models import Assignment, ConsensusVote, Criterion, CriterionEdit, PhysicianLabel
from tests.workspace import PASSWORD, attach, conversation, make_world, task

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "browser_workspace"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
    ),
]


@pytest.fixture
def browser(monkeypatch):
    # Playwright's sync API runs an event loop in this thread; the ORM calls the test makes
    # between browser steps are still plain synchronous code, so allow them.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
        # ORM calls made while Playwright runs get their own database connection (Django keys
        # connections by context, and Playwright's sync API switches contexts): close it here,
        # or PostgreSQL refuses to drop the test database at the end of the session.
        connections.close_all()


def _log_in(browser, live_server, username):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector(f"text=Welcome, {username}")
    return page


def _shot(page, name):
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _add_criterion(page, text, points, axis):
    page.fill("#id_new_text", text)
    page.fill("#id_new_points", str(points))
    page.select_option("#id_new_axis", axis)
    page.click("#add-criterion button[type=submit]")


def test_a_physician_writes_votes_and_labels_then_a_second_vote_attaches(
    browser, live_server, transactional_db, settings
):
    from playwright.sync_api import expect

    settings.CONSENSUS_MIN_AGREE = 2
    world = make_world()
    fresh = conversation("conv-browser")
    task(world.owner, Assignment.Kind.RUBRIC, fresh)
    # Labeling items on conv-b, whose rubric the owner did not write.
    entry_b = world.other_theme
    cluster_b = attach(world.b, entry_b)
    responses_b = [
        world.b.responses.create(text=f"Response B{n}: it depends.", model_name="m", sample_index=n) for n in range(2)
    ]
    for response in responses_b:
        task(world.owner, Assignment.Kind.LABEL, world.b, response=response, criterion=cluster_b)

    page = _log_in(browser, live_server, "dr_owner")
    expect(page.locator("#tasks-rubric")).to_contain_text("2 to do")
    _shot(page, "01-home")

    # The rubric: a validation error first, shown beside the field, then three criteria.
    page.goto(f"{live_server.url}/conversations/{fresh.code}/rubric/")
    page.evaluate("window.__sameDocument = true")
    _add_criterion(page, "Advises calling emergency services immediately.", 0, "completeness")
    expect(page.locator("#err_new_points")).to_contain_text("0 points is not allowed")
    _shot(page, "02-rubric-validation-error")
    page.fill("#id_new_points", "9")
    page.click("#add-criterion button[type=submit]")
    expect(page.locator("#criteria > li")).to_have_count(1)
    _add_criterion(page, "Fails to mention chewing aspirin.", 4, "accuracy")
    expect(page.locator("#criteria > li")).to_have_count(2)
    expect(page.locator("#criteria > li").nth(1)).to_contain_text("Reads as a failure")
    _add_criterion(page, "Suggests waiting to see if the pain passes.", -8, "accuracy")
    expect(page.locator("#criteria > li")).to_have_count(3)
    expect(page.locator("#rubric-summary .total")).to_have_text("13")
    # Fix the sign of the second criterion in place.
    second = page.locator("#criteria > li").nth(1)
    second.get_by_role("link", name="Edit").click()
    second_form = page.locator("#criteria > li.editing")
    second_form.locator("input[name=points]").fill("-4")
    second_form.get_by_role("button", name="Save").click()
    expect(page.locator("#criteria > li").nth(1)).not_to_contain_text("Reads as a failure")
    expect(page.locator("#rubric-summary .total")).to_have_text("9")
    assert page.evaluate("window.__sameDocument") is True  # every step above was an htmx swap
    _shot(page, "03-rubric-three-criteria")
    page.get_by_role("button", name="Submit and next").click()
    expect(page.locator(".messages")).to_contain_text("submitted")
    assert Assignment.objects.get(physician=world.owner, conversation=fresh).status == Assignment.Status.DONE
    assert Criterion.objects.filter(conversation=fresh, author=world.owner).count() == 3
    # Three creates and one update; the refused attempt left no trace.
    assert list(CriterionEdit.objects.filter(conversation=fresh).values_list("action", flat=True)) == ["create"] * 3 + [
        "update"
    ]

    # Consensus votes on conv-a.
    page.goto(f"{live_server.url}/conversations/{world.a.code}/votes/")
    row = page.locator(f"#vote-{world.catalogue[1].code}")
    row.get_by_role("button", name="Applies", exact=True).click()
    expect(page.locator(f"#vote-{world.catalogue[1].code}")).to_have_class("ballot-row applies")
    expect(page.locator("#vote-progress")).to_contain_text("1 of 3 voted")
    _shot(page, "04-votes")
    assert not Criterion.objects.filter(conversation=world.a, consensus_criterion=world.catalogue[1]).exists()

    # Labeling with the keyboard: m, then n; the next item arrives without a reload.
    page.goto(f"{live_server.url}/labels/")
    expect(page.locator("#label-item")).to_contain_text("Response B0")
    page.evaluate("window.__sameDocument = true")
    _shot(page, "05-label-first")
    page.keyboard.press("m")
    expect(page.locator("#label-item")).to_contain_text("Response B1")
    # Keys are ignored until htmx has settled the new item (the page says so with a class).
    expect(page.locator("#label-item.htmx-settling")).to_have_count(0)
    assert page.url.endswith(f"/labels/{Assignment.objects.get(response=responses_b[1]).code}/")
    page.keyboard.press("n")
    expect(page.locator("#label-item")).to_contain_text("Nothing left to label")
    assert page.evaluate("window.__sameDocument") is True
    _shot(page, "06-label-done")
    labels = dict(PhysicianLabel.objects.filter(physician=world.owner).values_list("response_id", "met"))
    assert labels == {responses_b[0].id: True, responses_b[1].id: False}
    page.close()

    # A second physician agrees: the consensus criterion is attached.
    other = _log_in(browser, live_server, "dr_colleague")
    other.goto(f"{live_server.url}/conversations/{world.a.code}/votes/")
    expect(other.locator(f"#vote-{world.catalogue[1].code}")).to_have_class(
        "ballot-row"
    )  # the owner's vote is not shown
    other.locator(f"#vote-{world.catalogue[1].code}").get_by_role("button", name="Applies", exact=True).click()
    expect(other.locator(f"#vote-{world.catalogue[1].code}")).to_have_class("ballot-row applies")
    _shot(other, "07-second-vote")
    assert (
        ConsensusVote.objects.filter(conversation=world.a, consensus_criterion=world.catalogue[1], applies=True).count()
        == 2
    )
    attached = Criterion.objects.get(conversation=world.a, consensus_criterion=world.catalogue[1])
    assert attached.origin == Criterion.Origin.VOTES
    assert attached.tags == world.catalogue[1].tags()
    other.close()


def test_the_pages_work_without_javascript(browser, live_server, transactional_db):
    from playwright.sync_api import expect

    world = make_world()
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "dr_owner")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/conversations/{world.a.code}/rubric/")
    _add_criterion(page, "Asks how long the pain has lasted.", 11, "context_awareness")
    expect(page.locator("#err_new_points")).to_contain_text("Points go up to 10")
    page.fill("#id_new_points", "6")
    page.click("#add-criterion button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Criterion added.")
    mine = Criterion.objects.get(conversation=world.a, author=world.owner)
    page.locator(f"#criterion-{mine.id}").get_by_role("link", name="Edit").click()
    page.locator(f"#criterion-{mine.id} input[name=points]").fill("7")
    page.locator(f"#criterion-{mine.id}").get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text("Criterion saved.")
    mine.refresh_from_db()
    assert mine.points == 7
    page.goto(f"{live_server.url}/conversations/{world.a.code}/votes/")
    page.locator(f"#vote-{world.catalogue[2].code}").get_by_role("button", name="Does not apply").click()
    expect(page.locator(f"#vote-{world.catalogue[2].code}")).to_have_class("ballot-row not-applies")
    _shot(page, "08-no-javascript")
    context.close()
