"""A curator links an external physician to an account in Chromium at 1366 and 390 px, on the demo.

External physicians come from an imported meta-eval file; the assignment preview says how many it
left out, the link page previews and then links. axe-core and the width check run on every state
(tests/browser_walk.py).
"""

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from annotation.models import Physician
from tests.browser_walk import PASSWORD, WIDTHS, browser_marks
from tests.metaeval_rows import meta_row, physician, write

pytest_plugins = ["tests.browser_walk"]
pytestmark = browser_marks


@pytest.mark.parametrize("width", WIDTHS)
def test_a_curator_sees_external_physicians_left_out_and_links_one(visit, width, tmp_path):
    path = tmp_path / "meta.jsonl"
    write(path, meta_row("ext-1", "c-1", labels=(True, False, True), physicians=(0, 1, 2)))
    call_command("import_meta_eval", path, stdout=StringIO())
    User.objects.create_user("dr_found", password=PASSWORD)
    curator = visit("curator", width)
    page = curator.go("/curator/assignments/?kind=label&limit=50&per_item=2&condition=no_reference")
    assert "3 external physicians left out" in curator.text("#preview")
    page = curator.go("/curator/physicians/")
    assert "3 external physicians from imported files" in curator.text()
    page.click("text=Link an external physician to an account")
    page.wait_for_selector("h1:has-text('Link an external physician')")
    curator.check("link page")
    page.click(f"a:has-text('{physician(1)[:20]}')")
    page.wait_for_load_state()
    assert page.input_value("#id_external") == physician(1)
    page.fill("#id_username", "dr_found")
    page.click("button:has-text('Preview')")
    page.wait_for_selector("#link-preview")
    curator.check("preview")
    assert "becomes the account dr_found" in curator.text("#link-preview")
    assert Physician.objects.get(anonymized_id=physician(1)).user is None
    page.click("#link-preview button[type=submit]")
    page.wait_for_selector("#messages li")
    curator.check("linked")
    assert "is now dr_found: 1 label kept" in curator.text("#messages")
    assert Physician.objects.get(anonymized_id=physician(1)).user.username == "dr_found"
