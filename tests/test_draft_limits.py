"""Drafts have a size: a length per field, a number per physician, and only real fields keep one."""

import pytest
from django.urls import reverse

from annotation.models import Criterion, Draft
from tests.workspace import client_for, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings):
    settings.CONSENSUS_MIN_AGREE = 2
    return make_world()


def _draft(client, key, text):
    return client.post(reverse("draft_save"), {"key": key, "text": text})


def _own_criterion(world) -> Criterion:
    return Criterion.objects.create(
        conversation=world.a,
        position=5,
        text="Asks about the pain.",
        points=3,
        tags=["level:example", "axis:completeness"],
        axis="completeness",
        author=world.owner,
    )


def test_a_criterion_draft_is_refused_past_the_criterion_forms_limit(world):
    owner = client_for(world.owner)
    key = f"criterion:{world.a.code}:new"
    assert _draft(owner, key, "x" * 2000).status_code == 200
    refused = _draft(owner, key, "x" * 2001)
    assert refused.status_code == 400
    assert refused.json() == {"error": "This field holds at most 2,000 characters; the draft has 2,001."}
    assert Draft.objects.get(key=key).text == "x" * 2000


def test_an_ideal_response_draft_takes_the_ideal_forms_length(world):
    owner = client_for(world.owner)
    key = f"ideal:{world.a.code}"
    assert _draft(owner, key, "y" * 20000).status_code == 200
    assert _draft(owner, key, "y" * 20001).status_code == 400


def test_a_label_comment_draft_takes_the_comment_forms_length(world):
    colleague = client_for(world.colleague)
    key = f"label-comment:{world.label_task.code}"
    assert _draft(colleague, key, "z" * 2001).status_code == 400
    assert not Draft.objects.exists()


def test_a_made_up_criterion_id_keeps_no_draft(world):
    owner = client_for(world.owner)
    for made_up in (999999, world.imported.id, world.cluster.id):
        assert _draft(owner, f"criterion:{world.a.code}:{made_up}", "edits").status_code == 404
    assert not Draft.objects.exists()


def test_the_physicians_own_criterion_keeps_its_draft(world):
    mine = _own_criterion(world)
    assert _draft(client_for(world.owner), f"criterion:{world.a.code}:{mine.id}", "edits").status_code == 200
    # ...and on another conversation's key it is no criterion of that rubric.
    assert _draft(client_for(world.owner), f"criterion:{world.b.code}:{mine.id}", "edits").status_code == 404


def test_a_physician_keeps_at_most_drafts_per_physician_and_may_still_update_them(world, settings):
    settings.DRAFTS_PER_PHYSICIAN = 2
    owner = client_for(world.owner)
    mine = _own_criterion(world)
    assert _draft(owner, f"ideal:{world.a.code}", "one").status_code == 200
    assert _draft(owner, f"criterion:{world.a.code}:new", "two").status_code == 200
    refused = _draft(owner, f"criterion:{world.a.code}:{mine.id}", "three")
    assert refused.status_code == 400
    assert refused.json()["error"].startswith("You have 2 unsubmitted drafts, the most the server keeps")
    assert Draft.objects.filter(physician=world.owner).count() == 2
    # The drafts kept are still saved as one types, and a submitted one makes room.
    assert _draft(owner, f"ideal:{world.a.code}", "one, longer").status_code == 200
    assert _draft(owner, f"ideal:{world.a.code}", "   ").status_code == 200  # emptied: discarded
    assert _draft(owner, f"criterion:{world.a.code}:{mine.id}", "three").status_code == 200
    # Another physician's count is their own.
    assert _draft(client_for(world.colleague), f"label-comment:{world.label_task.code}", "c").status_code == 200


def test_the_default_cap_is_200(settings):
    assert settings.DRAFTS_PER_PHYSICIAN == 200
