"""Markdown is shown formatted where texts are read, and nothing in a stored text runs in a page.

Every reading page gets the same hostile text (script tags, event handlers, javascript: links,
frames) in the response, the criterion, the conversation and the guidelines; none of it may come
out as markup, while the Markdown around it does.
"""

import pytest
from django.urls import reverse

from annotation.models import ConsensusCriterion, Criterion, Guideline
from grading.models import Grade, Run
from healthbench_web.markdown_text import markdown_html
from tests.workspace import client_for, make_world

pytestmark = pytest.mark.django_db

HOSTILE = (
    "Should:\n- **Appropriately** suggest care\n- Have low likelihood of harm\n\n"
    '<script>alert("x")</script> <img src=x onerror=alert(1)> <iframe src="//evil.example"></iframe>\n\n'
    '[click](javascript:alert(1)) <a href="javascript:alert(2)">link</a> <svg onload=alert(3)>\n\n'
    "![pixel](https://tracker.example/p.png) [data](data:text/html;base64,PHNjcmlwdD4=)"
)
# What must never reach a page as markup from a stored text.
FORBIDDEN = (
    "<script>alert",
    "<img",
    "<iframe",
    "<svg onload",
    '<a href="javascript:',
    '<a href="data:',
    "onerror=alert(1)>",
)


def _safe(page: str) -> None:
    for bad in FORBIDDEN:
        assert bad not in page, bad
    # The Markdown itself is formatted.
    assert '<li dir="auto"><strong>Appropriately</strong> suggest care</li>' in page


def test_the_renderer_keeps_markdown_and_drops_everything_else():
    html = markdown_html(HOSTILE)
    _safe(html)
    assert "&lt;script&gt;" in html  # shown as the text it is
    assert markdown_html("# Heading") == '<p class="md-heading" dir="auto"><strong>Heading</strong></p>\n'
    assert markdown_html(None) == ""


def test_every_block_takes_the_direction_of_its_own_text():
    html = markdown_html("שלום?\n\n- one\n- שתיים\n\n> quote\n\n| a |\n|---|\n| ب |\n\n1. first")
    assert html.count('dir="auto"') == 11, html
    for block in ("<p ", "<ul ", "<li ", "<blockquote ", "<table ", "<th ", "<td ", "<ol "):
        assert f'{block}dir="auto"' in html, block
    # A text cannot bring its own direction: raw HTML stays text.
    assert '<p dir="rtl">' not in markdown_html('<p dir="rtl">x</p>')


@pytest.fixture
def hostile():
    world = make_world()
    world.a.messages = [{"role": "user", "content": HOSTILE}]
    world.a.save(update_fields=["messages"])
    for response in world.responses:
        response.text = HOSTILE
        response.save(update_fields=["text"])
    Criterion.objects.filter(id=world.cluster.id).update(text=HOSTILE)
    ConsensusCriterion.objects.filter(theme=world.a.theme).update(text=HOSTILE)
    Guideline.objects.create(kind="label", text=HOSTILE)
    return world


def test_physician_pages_render_markdown_safely(hostile):
    labeler = client_for(hostile.colleague)
    _safe(labeler.get(reverse("label_item", args=[hostile.label_task.code])).content.decode())
    owner = client_for(hostile.owner)
    _safe(owner.get(reverse("votes", args=[hostile.a.code])).content.decode())
    _safe(owner.get(reverse("ideal_editor", args=[hostile.a.code])).content.decode())
    _safe(owner.get(reverse("rubric_editor", args=[hostile.a.code])).content.decode())
    _safe(owner.get(reverse("guidelines")).content.decode())


def test_curator_and_researcher_pages_render_markdown_safely(hostile):
    curator = client_for(hostile.curator)
    _safe(curator.get(reverse("conversation_detail", args=[hostile.a.code])).content.decode())
    _safe(curator.get(reverse("consensus_tally", args=[hostile.a.code])).content.decode())
    run = Run.objects.create(plan=Run.Plan.STORED, name="xss-run", status=Run.Status.DONE)
    response = hostile.responses[0]
    Grade.objects.create(
        run=run,
        response=response,
        criterion=hostile.cluster,
        position=0,
        criterion_text=HOSTILE,
        points=5,
        tags=[],
        status=Grade.Status.GRADED,
        met=True,
        explanation="fine",
        attempts=1,
    )
    researcher = client_for(hostile.researcher)
    page = researcher.get(reverse("report_transcript", args=[run.code, response.code])).content.decode()
    _safe(page)
