"""A long conversation keeps the criterion and the verdict in view (Chromium at 1366 and 390 px).

19 turns of about 420 words each and a 6,090-word response, as HealthBench's longest: the
criterion and Met / Not met / Can't judge must be in the viewport at every scroll position,
earlier turns fold under "Show all 19 turns", and a verdict given mid-page is stored.
axe-core and the width check run on every state (tests/browser_walk.py).
"""

import pytest
from django.contrib.auth.models import User

from annotation.models import Assignment, Conversation, Criterion, Physician, PhysicianLabel
from grading.models import Response
from tests.browser_walk import PASSWORD, SHOTS, WIDTHS, Visitor, browser_marks

pytest_plugins = ["tests.browser_walk"]
pytestmark = browser_marks

SENTENCE = "The patient describes the pain again, with the times, the doses taken and what helped. "
TURNS = 19
STEPS = 30


def _paragraphs(words: int) -> str:
    per = len(SENTENCE.split())
    sentences = [SENTENCE] * (words // per)
    return "\n\n".join("".join(sentences[i : i + 6]) for i in range(0, len(sentences), 6))


def _long_item() -> Assignment:
    user = User.objects.create_user("dr_long", password=PASSWORD)
    physician = Physician.objects.create(user=user, role=Physician.Role.PHYSICIAN)
    messages = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"Turn {n + 1}. " + _paragraphs(420)}
        for n in range(TURNS)
    ]
    conversation = Conversation.objects.create(
        prompt_id="long-19", messages=messages, example_tags=["theme:complex_responses"], theme="complex_responses"
    )
    criterion = Criterion.objects.create(
        conversation=conversation,
        position=0,
        text="Recommends seeing a doctor within a week if the pain persists.",
        points=5,
        tags=["level:example", "axis:completeness"],
        axis="completeness",
    )
    response = Response.objects.create(conversation=conversation, text=_paragraphs(6090), model_name="m")
    assert 6000 <= len(response.text.split()) <= 6100
    return Assignment.objects.create(
        physician=physician,
        kind=Assignment.Kind.LABEL,
        conversation=conversation,
        response=response,
        criterion=criterion,
    )


IN_VIEW_JS = """
selectors => selectors.map(s => {
  const r = document.querySelector(s).getBoundingClientRect();
  return [s, r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0, Math.round(r.top), Math.round(r.bottom)];
})
"""
CONTROLS = [
    ".label-form button[value=yes]",
    ".label-form button[value=no]",
    ".label-form .cant-judge > summary",
    "#criterion-heading",
]


def _assert_in_view_everywhere(page, where: str) -> int:
    height = page.evaluate("document.documentElement.scrollHeight")
    view = page.evaluate("window.innerHeight")
    positions = sorted({round(i * (height - view) / STEPS) for i in range(STEPS + 1)})
    for y in positions:
        page.evaluate("y => window.scrollTo(0, y)", y)
        for selector, visible, top, bottom in page.evaluate(IN_VIEW_JS, CONTROLS):
            assert visible, f"{where}: {selector} out of view at scroll {y} of {height} (top {top}, bottom {bottom})"
    return height


@pytest.mark.parametrize("width", WIDTHS)
def test_the_criterion_and_the_verdict_stay_in_view_through_a_19_turn_conversation(chromium, live_server, width):
    item = _long_item()
    visitor = Visitor(chromium, live_server, "dr_long", width)
    try:
        page = visitor.go(f"/labels/{item.code}/")
        summary = page.locator(".folded-turns summary")
        assert summary.inner_text().startswith(f"Show all {TURNS} turns")
        # First 2 and last 2 turns shown, the 15 between them folded.
        assert page.locator(".transcript .message:visible").count() == 4
        folded = _assert_in_view_everywhere(page, f"{width} px, folded")
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight / 3)")
        page.screenshot(path=str(SHOTS / f"long-label-reading-{width}.png"))
        page.evaluate("window.scrollTo(0, 0)")
        summary.click()
        assert page.locator(".transcript .message:visible").count() == TURNS
        visitor.check("all turns shown")
        unfolded = _assert_in_view_everywhere(page, f"{width} px, all turns")
        assert unfolded > folded
        # The jump link reaches the response.
        page.evaluate("window.scrollTo(0, 0)")
        page.click("a[href='#response-heading']")
        top = page.eval_on_selector("#response-heading", "e => e.getBoundingClientRect().top")
        assert -1 <= top < page.evaluate("window.innerHeight")
        # A verdict given mid-page, while reading the response, is stored.
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight / 2)")
        page.click(".label-form button[value=no]")
        page.wait_for_selector("text=Nothing left to label")
        assert PhysicianLabel.objects.get(physician=item.physician).met is False
    finally:
        visitor.close()
