"""The physician quality pages in Chromium at 1366 and 390 px: the curator's overview with
physicians flagged for review and their evidence, one physician's page as a curator reads it,
the accounts and the programme's totals on the statistics page, and a physician's own page.
Each is checked for sideways scrolling and with axe-core (tests/browser_walk.py)."""

import pytest
from django.core.cache import cache

from annotation.models import Criterion, GoldAnswer, GoldItem
from grading.models import Response
from tests.browser_walk import WIDTHS, browser_marks, physician_named
from tests.physician_programme import planted_programme

pytest_plugins = ["tests.browser_walk"]
pytestmark = browser_marks


@pytest.mark.parametrize("width", WIDTHS)
def test_the_quality_pages_pass_axe_and_fit_the_window(visit, width):
    cache.clear()
    planted = planted_programme(n_physicians=10, n_labels=1600)
    curator = visit("curator", width)
    page = curator.go("/curator/physicians/quality/")
    assert page.locator(f"#flagged-{planted.sloppy.code}").count() == 1
    assert "Items where they disagreed" in curator.text()
    curator.shot("physician-quality-overview")
    curator.go(f"/physicians/{planted.slow.code}/quality/")
    assert "Active time per task" in curator.text()
    curator.shot("physician-quality-detail")
    curator.go("/curator/physicians/accounts/?start=2026-03-01&end=2026-03-31")
    assert "Programme totals" in curator.text()
    page = curator.go("/stats/")
    page.wait_for_selector("#programme-totals")
    curator.check("programme totals loaded")
    physician = visit("physician", width)
    own = physician_named("physician")
    physician.go(f"/physicians/{own.code}/quality/")
    assert "All physicians" not in physician.text()
    physician.shot("physician-quality-own")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_gold_pages_pass_axe_and_fit_the_window(visit, width):
    """Marking, editing (with the confirmation a changed known answer needs) and removing."""
    curator = visit("curator", width)
    criterion = Criterion.objects.filter(level=Criterion.Level.CLUSTER, conversation__responses__isnull=False).first()
    assert criterion is not None, "the demo has a response on a conversation with an attached consensus criterion"
    response = Response.objects.filter(conversation=criterion.conversation_id).first()
    gold = GoldItem.objects.create(
        conversation_id=criterion.conversation_id, response=response, criterion=criterion, answer=True, rationale="Why."
    )
    GoldAnswer.objects.create(gold=gold, physician=physician_named("physician"), answer=True)
    curator.go("/curator/gold/")
    page = curator.go(f"/curator/gold/?conversation={criterion.conversation.prompt_id}")
    assert page.locator("form.gold-form").count() == 1
    page = curator.go(f"/curator/gold/{gold.id}/edit/")
    page.check("#id_known_1")
    page.click("form.gold-form button[type=submit]")
    curator.check("a changed known answer, to confirm")
    assert "1 matches the known answer now" in curator.text()
    page.click("#confirm-change button[type=submit]")
    curator.check("changed")
    assert "Gold item changed: known answer not met." in curator.text()
    page = curator.go(f"/curator/gold/{gold.id}/remove/")
    page.click("button.danger-fill")
    curator.check("removed")
    assert "Gold mark removed" in curator.text()
    assert not GoldItem.objects.filter(id=gold.id).exists()
