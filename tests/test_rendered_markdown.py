"""Each stored text's Markdown is rendered once and kept under a hash of the text (and of the
renderer): pages read it back instead of rendering it, a changed text is shown changed, and the
HTML read back is the renderer's own, sanitised, with dir="auto" on every block."""

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Criterion, Guideline, RenderedMarkdown
from annotation.services.rendered_markdown import markdown_cache_clear, markdown_digest
from healthbench_web.markdown_text import markdown_html
from tests.test_markdown_pages import FORBIDDEN, HOSTILE
from tests.workspace import client_for, make_world

pytestmark = pytest.mark.django_db

STORE = RenderedMarkdown._meta.db_table
# Each page's queries once its texts are in this process (the budgets of the pages' own tests).
# The task pages count one more for their time-on-task event (annotation/services/time_on_task.py),
# and the ballot one more for the physician's answered gold items (annotation/selectors/gold.py).
PAGES = {"label": 9, "ballot": 10, "rubric editor": 7, "ideal response": 9, "home": 4}


@pytest.fixture
def world():
    markdown_cache_clear()
    world = make_world()
    Guideline.objects.create(kind="label", text="Read the **whole** answer.")
    return world


def _get(world, page: str, client=None):
    """The page, for the physician whose task it is (`client` logged in already, if given)."""
    client = client or _client(world, page)
    if page == "label":
        return client.get(reverse("label_item", args=[world.label_task.code]))
    views = {"ballot": "votes", "rubric editor": "rubric_editor", "ideal response": "ideal_editor"}
    return client.get("/" if page == "home" else reverse(views[page], args=[world.a.code]))


def _client(world, page: str):
    return client_for(world.colleague if page == "label" else world.owner)


def _store_queries(queries) -> tuple[int, int]:
    reads = sum(1 for q in queries if STORE in q["sql"] and q["sql"].lstrip().upper().startswith("SELECT"))
    writes = sum(1 for q in queries if STORE in q["sql"] and q["sql"].lstrip().upper().startswith("INSERT"))
    return reads, writes


def test_the_label_page_stores_each_text_it_shows_once(world):
    assert _get(world, "label").status_code == 200
    texts = [m["content"] for m in world.a.messages] + [world.responses[0].text, world.cluster.text]
    texts.append("Read the **whole** answer.")
    for text in texts:
        stored = RenderedMarkdown.objects.get(digest=markdown_digest(text))
        assert stored.html == markdown_html(text)
    markdown_cache_clear()  # another process: it reads the store and writes nothing
    client = _client(world, "label")
    with CaptureQueriesContext(connection) as queries:
        assert _get(world, "label", client).status_code == 200
    assert _store_queries(queries.captured_queries) == (1, 0)


@pytest.mark.parametrize("page", list(PAGES))
def test_each_page_costs_a_fixed_number_of_queries_cold_stored_and_warm(world, page, django_assert_max_num_queries):
    budget, client = PAGES[page], _client(world, page)
    # Nothing rendered yet: one query for the store and one to fill it.
    with django_assert_max_num_queries(budget + 2):
        assert _get(world, page, client).status_code == 200
    # Rendered by another process: one query for the store.
    markdown_cache_clear()
    with django_assert_max_num_queries(budget + 1):
        assert _get(world, page, client).status_code == 200
    with django_assert_max_num_queries(budget):
        assert _get(world, page, client).status_code == 200


def test_a_changed_text_is_shown_as_it_is_now(world):
    assert "Tells the user to call emergency services now." in _get(world, "rubric editor").text
    Criterion.objects.filter(id=world.imported.id).update(text="Tells the user to **wait**.")
    page = _get(world, "rubric editor").text
    assert "Tells the user to call emergency services now." not in page
    assert markdown_html("Tells the user to **wait**.") in page


def test_hostile_text_read_back_from_the_store_is_still_sanitised(world):
    world.a.messages = [{"role": "user", "content": HOSTILE}]
    world.a.save(update_fields=["messages"])
    Criterion.objects.filter(id=world.cluster.id).update(text=HOSTILE)
    first = _get(world, "label").text
    markdown_cache_clear()
    second = _get(world, "label").text
    assert RenderedMarkdown.objects.filter(digest=markdown_digest(HOSTILE)).exists()
    for page in (first, second):
        for bad in FORBIDDEN:
            assert bad not in page, bad
        assert '<li dir="auto"><strong>Appropriately</strong> suggest care</li>' in page
        assert page.count(markdown_html(HOSTILE)) == 2  # the turn and the criterion


def test_the_command_renders_every_stored_text_once(world):
    call_command("render_markdown", stdout=(out := io.StringIO()))
    assert "Rendered" in out.getvalue()
    assert RenderedMarkdown.objects.filter(digest=markdown_digest(world.responses[1].text)).exists()
    assert RenderedMarkdown.objects.filter(digest=markdown_digest(world.catalogue[2].text)).exists()
    call_command("render_markdown", stdout=(again := io.StringIO()))
    assert again.getvalue().strip() == "Rendered 0 text(s) not stored before."
    markdown_cache_clear()
    clients = {page: _client(world, page) for page in PAGES}
    with CaptureQueriesContext(connection) as queries:
        for page in PAGES:
            assert _get(world, page, clients[page]).status_code == 200
    assert _store_queries(queries.captured_queries)[1] == 0
