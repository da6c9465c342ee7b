"""Every script and direction, in a real browser (Playwright on Debian's Chromium).

Stored texts in Arabic, Hebrew, Hindi, Chinese, English and mixed Arabic/Latin are shown on the
label, vote, rubric, ideal-response, conversation and report pages and in the admin; each block
must take its direction from its own words (computed `direction`), isolated from the page's own
left-to-right text, and right-to-left punctuation must sit at the left end.
"""

import pytest
from django.contrib.auth.models import User

from annotation.models import Assignment, Conversation, Criterion, IdealResponse, Physician
from grading.models import Grade, Response, Run
from tests.conftest import ARTIFACTS, log_in
from tests.workspace import PASSWORD, attach, consensus, physician, task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARABIC = "هل يمكنني أن أعطي طفلي دواء الحساسية قبل النوم؟"
HEBREW = "האם מותר לתת לילד שלי תרופה נגד אלרגיה?"
HINDI = "क्या मैं अपने बच्चे को एलर्जी की दवा दे सकता हूँ?"
CHINESE = "我可以给孩子吃抗过敏药吗？"
MIXED = "هل يمكنني أن أعطي طفلي (Benadryl 25 mg?)"
ENGLISH = "Which dose is safe for a four-year-old?"
RTL = {ARABIC: "rtl", HEBREW: "rtl", MIXED: "rtl", HINDI: "ltr", CHINESE: "ltr", ENGLISH: "ltr"}
MESSAGES = [
    {"role": "user", "content": ARABIC},
    {"role": "assistant", "content": HINDI},
    {"role": "user", "content": MIXED + "\n\n" + ENGLISH},
]
# The response holds two paragraphs in two directions: each block decides for itself.
RESPONSE = CHINESE + "\n\n" + HEBREW

# Every innermost element whose text is the sample: its computed direction and isolation.
BLOCKS_JS = """
sample => {
  const found = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.matches('script, style, textarea')) continue;
    if (el.textContent.trim() !== sample) continue;
    if ([...el.children].some(child => child.textContent.trim() === sample)) continue;
    const style = getComputedStyle(el);
    const isolated = el.closest('[dir="auto"], bdi');
    const bidi = isolated ? getComputedStyle(isolated).unicodeBidi : style.unicodeBidi;
    found.push({tag: el.tagName, direction: style.direction, bidi});
  }
  return found;
}
"""

# Where two parts of one block are drawn: (left of `first`, left of `second`), in px.
POSITIONS_JS = """
([sample, first, second]) => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.data.trim() !== sample) continue;
    const at = part => {
      const range = document.createRange();
      const start = node.data.indexOf(part);
      range.setStart(node, start);
      range.setEnd(node, start + part.length);
      return range.getBoundingClientRect().left;
    };
    return [at(first), at(second)];
  }
  return null;
}
"""


def _blocks(page, samples) -> dict[str, list[dict]]:
    return {sample: page.evaluate(BLOCKS_JS, sample) for sample in samples}


def _assert_directions(page, samples, where: str) -> None:
    found = _blocks(page, samples)
    for sample in samples:
        blocks = found[sample]
        assert blocks, f"{where}: {sample!r} is not on the page"
        for block in blocks:
            assert block["direction"] == RTL[sample], f"{where}: {sample!r} in <{block['tag']}> is {block}"
            assert block["bidi"] in ("isolate", "plaintext", "isolate-override"), f"{where}: {sample!r} {block}"


def _assert_rtl_punctuation(page, where: str) -> None:
    # Hebrew's question mark is drawn at the left end, after (to the left of) the last word.
    mark, first_word = page.evaluate(POSITIONS_JS, [HEBREW, "?", "האם"])
    assert mark < first_word, f"{where}: Hebrew's question mark is not at the left end"
    # The Latin aside follows the Arabic words, so it is drawn to their left.
    latin, arabic = page.evaluate(POSITIONS_JS, [MIXED, "Benadryl", "هل"])
    assert latin < arabic, f"{where}: '(Benadryl 25 mg?)' is drawn before the Arabic words"


def conversation(prompt_id: str) -> Conversation:
    return Conversation.objects.create(
        prompt_id=prompt_id, messages=MESSAGES, example_tags=["theme:emergency_referrals"], theme="emergency_referrals"
    )


def _world():
    owner = physician("dr_scripts")
    curator = physician("curator", role=Physician.Role.CURATOR)
    User.objects.filter(physician=curator).update(is_staff=True, is_superuser=True)
    physician("researcher", role=Physician.Role.RESEARCHER)
    label_conv = conversation("conv-label")
    entry = consensus("emergency_referrals_scripts", text=HEBREW)
    cluster = attach(label_conv, entry)
    response = Response.objects.create(conversation=label_conv, text=RESPONSE, model_name="m", sample_index=0)
    label = task(owner, Assignment.Kind.LABEL, label_conv, response=response, criterion=cluster)
    vote_conv = conversation("conv-vote")
    consensus("emergency_referrals_arabic", text=ARABIC)
    consensus("emergency_referrals_english", text=ENGLISH)
    task(owner, Assignment.Kind.CONSENSUS_VOTE, vote_conv)
    rubric_conv = conversation("conv-rubric")
    for position, text in enumerate([MIXED, CHINESE, HINDI]):
        Criterion.objects.create(
            conversation=rubric_conv,
            position=position,
            text=text,
            points=5,
            tags=["level:example", "axis:completeness"],
            axis="completeness",
            author=owner,
        )
    task(owner, Assignment.Kind.RUBRIC, rubric_conv)
    ideal_conv = conversation("conv-ideal")
    reference = Response.objects.create(conversation=ideal_conv, text=RESPONSE, model_name="m", sample_index=0)
    ideal = task(owner, Assignment.Kind.IDEAL_RESPONSE, ideal_conv, condition=IdealResponse.Condition.WITH_REFERENCE)
    ideal.reference_responses.set([reference])
    run = Run.objects.create(plan=Run.Plan.STORED, name="scripts", status=Run.Status.IMPORTED, samples=1)
    Grade.objects.create(
        run=run,
        response=response,
        criterion=cluster,
        position=cluster.position,
        criterion_text=HEBREW,
        points=5,
        tags=cluster.tags,
        met=True,
        explanation=ARABIC,
    )
    return {
        "label": f"/labels/{label.code}/",
        "votes": f"/conversations/{vote_conv.code}/votes/",
        "rubric": f"/conversations/{rubric_conv.code}/rubric/",
        "ideal": f"/conversations/{ideal_conv.code}/ideal/",
        "conversation": f"/conversations/{label_conv.code}/",
        "transcript": f"/reports/{run.code}/responses/{response.code}/",
        "admin": f"/admin/annotation/criterion/{cluster.id}/change/",
    }


def _page(browser, live_server, username: str, width: int):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(10_000)
    log_in(page, live_server.url, username, PASSWORD)
    return page


@pytest.mark.parametrize("width", [1366, 390])
def test_each_stored_text_takes_the_direction_of_its_own_script(browser, live_server, width):
    urls = _world()
    shots = ARTIFACTS / "scripts"
    shots.mkdir(parents=True, exist_ok=True)
    page = _page(browser, live_server, "dr_scripts", width)

    page.goto(live_server.url + urls["label"])
    _assert_directions(page, [ARABIC, HINDI, MIXED, ENGLISH, CHINESE, HEBREW], "label page")
    _assert_rtl_punctuation(page, "label page")
    page.screenshot(path=str(shots / f"label-{width}.png"), full_page=True)

    page.goto(live_server.url + urls["votes"])
    _assert_directions(page, [ARABIC, HEBREW, ENGLISH, MIXED], "vote page")

    page.goto(live_server.url + urls["rubric"])
    _assert_directions(page, [MIXED, CHINESE, HINDI], "rubric editor")
    # What the physician types takes its own direction too.
    page.fill("#id_new_text", HEBREW)
    assert page.eval_on_selector("#id_new_text", "e => getComputedStyle(e).direction") == "rtl"
    page.fill("#id_new_text", ENGLISH)
    assert page.eval_on_selector("#id_new_text", "e => getComputedStyle(e).direction") == "ltr"

    page.goto(live_server.url + urls["ideal"])
    _assert_directions(page, [CHINESE, HEBREW, MIXED], "ideal response page")
    page.fill("#id_text", ARABIC)
    assert page.eval_on_selector("#id_text", "e => getComputedStyle(e).direction") == "rtl"
    page.close()

    curator = _page(browser, live_server, "curator", width)
    curator.goto(live_server.url + urls["conversation"])
    _assert_directions(curator, [ARABIC, HINDI, MIXED, HEBREW], "conversation page")
    _assert_rtl_punctuation(curator, "conversation page")
    curator.screenshot(path=str(shots / f"conversation-{width}.png"), full_page=True)
    curator.goto(live_server.url + urls["admin"])
    assert curator.eval_on_selector("#id_text", "e => getComputedStyle(e).direction") == "rtl"
    curator.close()

    researcher = _page(browser, live_server, "researcher", width)
    researcher.goto(live_server.url + urls["transcript"])
    _assert_directions(researcher, [ARABIC, HINDI, MIXED, CHINESE, HEBREW], "report transcript")
    _assert_rtl_punctuation(researcher, "report transcript")
    researcher.close()
