"""A curator builds, freezes and exports a subset in a real browser."""

import json

import pytest
from django.core.management import call_command

from annotation.models import Physician, SubsetVersion
from tests.conftest import ARTIFACTS, log_in
from tests.healthbench_rows import consensus_row, row, write
from tests.people import person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_curator_builds_freezes_and_exports_a_subset(browser, live_server, tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"), consensus_row("p-2"), consensus_row("p-3", theme="hedging"))
    call_command("import_healthbench", path)
    person("cura", Physician.Role.CURATOR)
    page = browser.new_page()
    log_in(page, live_server.url, "cura", "pw-cura")

    page.goto(live_server.url + "/curator/subsets/")
    page.fill("#id_name", "Bad Name")
    page.click("text=Create subset")
    assert "Use lowercase letters" in page.inner_text("main")
    page.fill("#id_name", "emergencies")
    page.click("text=Create subset")
    page.wait_for_url("**/curator/subsets/emergencies/")

    page.check("input[name=themes][value=emergency_referrals]")
    page.click("text=Apply filter")
    assert "Add 1 match: 1 added, 0 removed" in page.inner_text("main")
    page.fill("#id_prompt_ids", "p-3")
    page.click("form[action$='/pick/'] button")
    assert "1 added, 0 removed" in page.inner_text("main")
    assert page.locator("#members tbody tr").count() == 2

    page.click("#freeze")
    # Freezing ends the undo of the hand-pick: asked first.
    assert "give up the undo" in page.inner_text("main")
    page.click("#freeze-anyway")
    assert "Frozen as version 1" in page.inner_text("main")
    page.screenshot(path=str(ARTIFACTS / "subset-frozen.png"), full_page=True)

    with page.expect_download() as download_info:
        page.click("#versions >> text=Export")
    exported = download_info.value.path().read_text().splitlines()
    assert [json.loads(x)["prompt_id"] for x in exported] == ["p-2", "p-3"]
    assert SubsetVersion.objects.get(subset__name="emergencies").number == 1
