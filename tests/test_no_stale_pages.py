"""Pages that change with every answer are never served from the browser's history or cache."""

import pytest
from django.urls import reverse

from tests.workspace import client_for, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


def _pages(world):
    return [
        (world.colleague, reverse("label_item", args=[world.label_task.code])),
        (world.colleague, reverse("label_next")),
        (world.owner, reverse("votes", args=[world.a.code])),
        (world.owner, reverse("rubric_editor", args=[world.a.code])),
        (world.owner, reverse("ideal_editor", args=[world.a.code])),
        (world.owner, reverse("home")),
    ]


def test_label_vote_and_editor_pages_say_no_store(world):
    for who, url in _pages(world):
        response = client_for(who).get(url, follow=True)
        assert response.status_code == 200, url
        assert "no-store" in response["Cache-Control"], url


def test_htmx_keeps_no_page_snapshots_so_back_reloads_from_the_server(world):
    page = client_for(world.colleague).get(reverse("label_item", args=[world.label_task.code])).text
    assert '"historyCacheSize": 0' in page
    assert '"refreshOnHistoryMiss": true' in page
