"""The physician quality pages in Chromium at 1366 and 390 px: the curator's overview with
physicians flagged for review and their evidence, one physician's page as a curator reads it,
the accounts and the programme's totals on the statistics page, and a physician's own page.
Each is checked for sideways scrolling and with axe-core (tests/browser_walk.py)."""

import pytest
from django.core.cache import cache

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
