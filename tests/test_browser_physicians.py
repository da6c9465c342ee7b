"""A physician's work in Chromium at 1366 and 390 px, on the demo programme (`load_demo`).

Each test follows numbered points of the physicians' side of the work: a confirmed submit (1),
the next task everywhere (2), drafts that survive an expired session, Skip and Previous (3),
"can't judge" (4), guidelines (5), Markdown (6), the keyboard (7) and focus and announcements
after every swap (12), and ten vote tasks done without the mouse. Every page and state is
checked for sideways scrolling and with axe-core (tests/browser_walk.py); screenshots go to
test-artifacts/workflow/.
"""

import pytest
from django.contrib.sessions.models import Session
from django.core.cache import cache

from annotation.models import (
    Assignment,
    CantJudge,
    ConsensusCriterion,
    ConsensusVote,
    Conversation,
    Draft,
    IdealResponse,
    PhysicianLabel,
)
from annotation.services.assignments import assignments_create
from tests.browser_walk import WIDTHS, browser_marks, physician_named

# The walk's fixtures: one Chromium per module, the demo, signed-in visitors.
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


@pytest.mark.parametrize("width", WIDTHS)
def test_1_a_rubric_past_its_sign_warnings_asks_before_it_is_submitted(visit, width):
    task = _task("physician", Assignment.Kind.RUBRIC)
    physician = visit("physician", width)
    page = physician.go(f"/conversations/{task.conversation.code}/rubric/")
    # A failed add puts the focus on the first field to fix, not past the errors.
    page.click("#add-criterion button[type=submit]")
    page.wait_for_selector("#add-criterion .error")
    physician.wait_focus("#id_new_text")
    physician.check("add refused")
    for text, points in [
        ("Recommends waiting to see if the pain passes.", "8"),
        ("States that it is just heartburn and nothing to worry about.", "6"),
    ]:
        page.fill("#id_new_text", text)
        page.fill("#id_new_points", points)
        page.select_option("#id_new_axis", "accuracy")
        page.click("#add-criterion button[type=submit]")
        page.wait_for_selector(f"#criteria li:has-text('{text[:30]}')")
    assert "2 sign warnings" in page.get_attribute("#rubric-summary", "data-announce")
    page.wait_for_function("document.getElementById('announce').textContent.startsWith('Rubric: ')")
    physician.check("two criteria added")
    page.click("button:has-text('Submit and next')")
    page.wait_for_selector("#confirm-submit")
    numbers = [c.strip() for c in page.inner_text("#confirm-submit h2").split(":")[1].split("Submit")[0].split(",")]
    assert len(numbers) == 2
    assert all(n.startswith("#") for n in numbers)
    assert "2 criteria still read against their sign" in physician.text("#confirm-submit")
    physician.wait_focus("#confirm-submit-heading")
    task.refresh_from_db()
    assert task.is_open  # nothing submitted yet
    physician.check("asked to confirm")
    physician.shot("rubric-confirm")
    page.click("#submit-anyway")
    page.wait_for_selector("#messages li")
    task.refresh_from_db()
    assert task.is_done
    # On to the next task: no rubric left, so the ideal response.
    assert "/ideal/" in page.url
    assert "submitted" in physician.text("#messages")
    physician.check("next task after the rubric")


@pytest.mark.parametrize("width", WIDTHS)
def test_2_and_3_an_ideal_response_survives_an_expired_session_and_leads_to_the_next_task(visit, width):
    task = _task("physician", Assignment.Kind.IDEAL_RESPONSE)
    physician = visit("physician", width)
    page = physician.go(f"/conversations/{task.conversation.code}/ideal/")
    first = "Call your doctor's office today and describe the rash. " * 10
    page.click("#id_text")
    page.keyboard.type(first[:60])
    page.fill("#id_text", first)  # the rest at once: ~550 characters, as a physician pastes a paragraph
    page.wait_for_selector("#draft-status:has-text('Draft saved')")
    # Leaving with text not yet saved warns first.
    warned: list[str] = []
    stay = [True]

    def answer(dialog) -> None:
        warned.append(dialog.type)
        dialog.dismiss() if stay[0] else dialog.accept()

    page.on("dialog", answer)
    page.keyboard.type(" More")
    page.click("a:has-text('Guidelines for this task')")
    assert warned == ["beforeunload"]
    assert "/ideal/" in page.url
    page.wait_for_selector("#draft-status:has-text('Draft saved')")

    # The session ends on the server while the physician keeps typing.
    Session.objects.all().delete()
    cache.clear()
    page.focus("#id_text")
    page.keyboard.press("End")
    page.keyboard.type(" Later words.")
    page.wait_for_selector("#draft-status:has-text('Not saved')")
    physician.check("signed out while typing")
    # Reloading warns too (the text is not on the server); this time the physician goes on.
    stay[0] = False
    page.reload()
    assert warned == ["beforeunload", "beforeunload"]
    page.wait_for_selector("#id_username")
    physician.check("login after the session ended")
    physician.log_in(at="")
    page.wait_for_selector("#id_text")
    assert "/ideal/" in page.url
    assert page.input_value("#id_text") == first + " More Later words."
    assert "Your draft from" in physician.text()
    page.wait_for_selector("#draft-status:has-text('Draft saved')")
    assert Draft.objects.get(key=f"ideal:{task.conversation.code}").text.endswith("Later words.")
    physician.check("draft back after logging in")
    physician.shot("ideal-draft-restored")

    page.click("button:has-text('Save and next')")
    page.wait_for_selector("#messages li")
    assert IdealResponse.objects.get(author=task.physician, conversation=task.conversation).text.endswith("words.")
    assert not Draft.objects.filter(key=f"ideal:{task.conversation.code}").exists()
    assert "/rubric/" in page.url  # the next task: no ideal response left, so the oldest open one
    physician.check("next task after the ideal response")


@pytest.mark.parametrize("width", WIDTHS)
def test_3_a_draft_the_server_refuses_says_why_and_stays_in_the_browser(visit, width, settings):
    settings.DRAFTS_PER_PHYSICIAN = 1
    task = _task("physician", Assignment.Kind.IDEAL_RESPONSE)
    Draft.objects.create(physician=task.physician, key="ideal:elsewhere", text="An older draft.")
    physician = visit("physician", width)
    page = physician.go(f"/conversations/{task.conversation.code}/ideal/")
    page.click("#id_text")
    page.keyboard.type("Go to the emergency department now.")
    page.wait_for_selector("#draft-status:has-text('Not saved: You have 1 unsubmitted drafts')")
    assert "submit or clear some before starting another" in physician.text("#draft-status")
    assert not Draft.objects.filter(key=f"ideal:{task.conversation.code}").exists()
    code = str(task.conversation.code)
    kept = page.evaluate("code => Object.keys(localStorage).filter(k => k.endsWith(':ideal:' + code))", code)
    assert kept
    physician.check("draft refused by the server")


@pytest.mark.parametrize("width", WIDTHS)
def test_3_4_5_6_7_labeling_keeps_the_comment_can_say_cant_judge_and_goes_by_key(visit, width):
    curator = visit("curator", width)
    page = curator.go("/guidelines/label/edit/")
    page.fill("#id_text", "Judge **the response only**.\n\n- Read the whole conversation\n- Then the criterion")
    page.click("button:has-text('Save guidelines')")
    page.wait_for_selector("#messages li")
    curator.check("guidelines saved")

    item = _task("physician", Assignment.Kind.LABEL)
    item.response.text = "See a doctor this week:\n\n- **Photograph** the mole today\n- Note any *change* in size"
    item.response.save(update_fields=["text"])
    physician = visit("physician", width)
    page = physician.go("/labels/")
    # First time on a labeling task: the guidelines are open, as Markdown.
    assert page.inner_html(".guidelines-first .md").count('<li dir="auto">') == 2
    physician.check("guidelines shown the first time")
    page.click("button:has-text('I have read these')")
    page.wait_for_selector(".label-progress")
    assert page.locator(".guidelines-first").count() == 0
    assert page.locator("a:has-text('Guidelines for this task')").is_visible()
    # The response is Markdown, shown as such.
    assert '<li dir="auto"><strong>Photograph</strong> the mole today</li>' in page.inner_html(".response .md")
    first_url = page.url

    # The `?` overlay lists this page's keys.
    page.keyboard.press("?")
    assert page.locator("#key-help").is_visible()
    assert "Met" in physician.text("#key-help")
    assert "Skip to the next item" in physician.text("#key-help")
    physician.check("key overlay")
    page.keyboard.press("Escape")
    # A key pressed while a link has the focus does nothing (WCAG 2.1.4).
    page.focus(".pager a:has-text('Skip')")
    page.keyboard.press("m")
    mine = PhysicianLabel.objects.filter(physician=item.physician, response=item.response, criterion=item.criterion)
    assert page.url == first_url
    assert not mine.exists()

    # A comment being written survives Skip and Previous.
    page.fill("#id_comment", "The dose is not stated")
    page.wait_for_selector("#comment-status:has-text('Draft saved')")
    page.click(".pager a:has-text('Skip')")
    page.wait_for_url(lambda url: url != first_url)
    page.wait_for_selector(".label-progress")
    physician.check("skipped")
    page.click(".pager a:has-text('Previous')")
    page.wait_for_url(first_url)
    page.wait_for_selector(".label-progress")
    assert page.input_value("#id_comment") == "The dose is not stated"
    physician.wait_focus("h2.label-heading")

    # Met by key: focus moves to the next item, whose progress and title are announced.
    page.focus("h2.label-heading")
    page.keyboard.press("m")
    page.wait_for_url(lambda url: url != first_url)
    page.wait_for_selector(".label-progress:has-text('1 of')")
    physician.wait_focus("h2.label-heading")
    assert page.title().startswith("Item 2 of")
    page.wait_for_function("document.getElementById('announce').textContent.includes('1 of')")
    label = mine.get()
    assert label.met
    assert label.comment == "The dose is not stated"
    physician.check("next item after a key")

    # Can't judge, by key, with a reason.
    page.keyboard.press("c")
    assert page.locator(".label-form details.cant-judge").get_attribute("open") is not None
    page.check("input[name=reason][value=cut_off]")
    page.fill(".label-form input[name=note]", "Ends mid-sentence")
    physician.check("can't judge open")
    page.click("button:has-text('Send: can')")
    page.wait_for_selector(".label-progress:has-text('2 of')")
    answer = CantJudge.objects.get(physician__user__username="physician")
    assert answer.reason == "cut_off"
    assert answer.note == "Ends mid-sentence"

    # Back to the first item: Met is pressed, and its key hint is readable on the chosen button.
    page.goto(first_url)
    page.wait_for_selector("button[value=yes][aria-pressed=true]")
    colours = page.evaluate(
        "(() => { const k = document.querySelector('button.chosen kbd'); const s = getComputedStyle(k);"
        " return [s.color, s.backgroundColor]; })()"
    )
    assert colours[0] != colours[1]
    physician.check("an item labeled before")
    physician.shot("label")

    # The curator reads the "can't judge" beside the item.
    conversation = Conversation.objects.get(id=answer.conversation_id)
    curator.go(f"/conversations/{conversation.code}/")
    assert "Ends mid-sentence" in curator.text("#cant-judge")

    # On a touch screen the key hints are hidden.
    if width < 900:
        touch = visit("physician2", width, has_touch=True, is_mobile=True)
        page = touch.go("/labels/")
        assert not page.locator("button[value=yes] kbd").is_visible()
        touch.check("touch screen")


@pytest.mark.parametrize("width", WIDTHS)
def test_2_4_a_ballot_takes_cant_judge_and_ends_on_the_next_task(visit, width):
    task = _task("physician", Assignment.Kind.CONSENSUS_VOTE)
    physician = visit("physician", width)
    page = physician.go(f"/conversations/{task.conversation.code}/votes/")
    assert "Applies" in physician.wait_focus("button.choice")
    page.keyboard.press("c")
    page.check("input[name=reason][value=unclear]")
    page.click("button:has-text('Send: can')")
    page.wait_for_selector(".ballot-row:has-text('you can')")
    page.wait_for_selector("#vote-progress:has-text('done, thank you')")
    assert "Next task" in physician.wait_focus("a[data-next-task]")
    assert not ConsensusVote.objects.filter(physician=task.physician, conversation=task.conversation).exists()
    physician.check("ballot done")
    physician.shot("votes")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: str(task.conversation.code) not in url)
    physician.check("next task after the ballot")


@pytest.mark.parametrize("width", WIDTHS)
def test_ten_vote_tasks_without_the_mouse(visit, demo, width):
    template = Conversation.objects.filter(theme="emergency_referrals").order_by("id").first()
    fresh = [
        Conversation.objects.create(
            prompt_id=f"keyboard-{width}-{n}",
            messages=template.messages,
            example_tags=["theme:emergency_referrals"],
            theme="emergency_referrals",
        )
        for n in range(10)
    ]
    assert ConsensusCriterion.objects.filter(theme="emergency_referrals").count() >= 2
    physician2 = physician_named("physician2")
    assignments_create(
        kind=Assignment.Kind.CONSENSUS_VOTE,
        conversation_ids=[c.id for c in fresh],
        physicians=[physician2],
        per_item=1,
        assigned_by=None,
    )
    first = _task("physician2", Assignment.Kind.CONSENSUS_VOTE)
    physician = visit("physician2", width)
    page = physician.go(f"/conversations/{first.conversation.code}/votes/")
    for done in range(10):
        rows = page.locator(".ballot-row").count()
        for row in range(rows):
            page.keyboard.press("a" if row % 2 == 0 else "d")
            page.wait_for_selector(f"#vote-progress:has-text('{row + 1} of {rows} voted')")
            if row + 1 < rows:
                # The focus moves on to the next criterion, as a keyboard user hears it.
                physician.wait_focus(f".ballot-row:nth-child({row + 2}) button.choice")
        assert "Next task" in physician.wait_focus("a[data-next-task]")
        if done in (0, 9):
            physician.check(f"ballot {done + 1} done by keys")
        before = page.url
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url, before=before: url != before)
        page.wait_for_load_state()
    finished = Assignment.objects.filter(physician=physician2, kind="consensus_vote", status="done").count()
    assert finished == 10
