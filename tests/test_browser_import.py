"""A curator imports a file in a real browser: the upload shows its progress, and a bad file
is listed by line and field. Only the import region is replaced: the page stays (its menu works),
the focus goes to the result's heading and the result is announced."""

import pytest

from annotation.models import Conversation, Physician
from tests.conftest import ARTIFACTS, log_in
from tests.healthbench_rows import line, row
from tests.people import person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WATCH_PROGRESS = """() => {
  window.stayed = true;  // survives only if the answer replaced a part of the page, not the page
  document.body.dataset.kept = "yes";  // survives only if the body itself was kept
  window.progress = [];
  const bar = document.querySelector('#upload-progress');
  new MutationObserver(() => window.progress.push([bar.value, bar.max])).observe(bar, {attributes: true});
}"""


def test_a_curator_watches_a_large_upload_and_sees_it_imported(browser, live_server, tmp_path):
    path = tmp_path / "main.jsonl"
    path.write_bytes(b"".join(line(row(f"p-{i}")) for i in range(3000)))
    person("cura", Physician.Role.CURATOR)
    page = browser.new_page()
    log_in(page, live_server.url, "cura", "pw-cura")
    page.goto(live_server.url + "/curator/import/")
    assert "Files up to 256 MB" in page.inner_text("main")
    page.evaluate(WATCH_PROGRESS)
    page.set_input_files("#id_file", str(path))
    page.click("form[data-upload-progress] button[type=submit]")
    page.wait_for_selector("#import-summary", timeout=60_000)
    assert "3000 rows: 3000 new conversations" in page.inner_text("#import-summary")
    assert page.evaluate("window.stayed") is True
    assert page.evaluate("document.body.dataset.kept") == "yes"
    assert page.evaluate("document.activeElement.closest('#import-summary h2') !== null")
    page.wait_for_function("document.getElementById('announce').textContent.startsWith('Imported main.jsonl')")
    assert "3000 rows" in page.inner_text("#announce")
    progress = page.evaluate("window.progress")
    # The request body is the file plus the form around it.
    assert progress
    assert progress[-1][0] == progress[-1][1] >= path.stat().st_size
    page.screenshot(path=str(ARTIFACTS / "import-done.png"), full_page=True)
    assert Conversation.objects.count() == 3000


def test_a_bad_upload_is_listed_by_line_and_field(browser, live_server, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(line(row("p-1")) + b'{"prompt_id": "a", "prompt_id": "b"}\n')
    person("cura", Physician.Role.CURATOR)
    page = browser.new_page()
    log_in(page, live_server.url, "cura", "pw-cura")
    page.goto(live_server.url + "/curator/import/")
    page.set_input_files("#id_file", str(path))
    page.click("form[data-upload-progress] button[type=submit]")
    page.wait_for_selector("#import-errors")
    assert page.evaluate("document.activeElement.closest('#import-errors h2') !== null")
    page.wait_for_function("document.getElementById('announce').textContent.startsWith('Not imported: 1 problem')")
    errors = page.inner_text("#import-errors")
    assert "prompt_id" in errors
    assert "appears twice in the same object" in errors
    assert not Conversation.objects.exists()


def test_a_file_over_the_limit_is_refused_before_it_is_sent(browser, live_server, tmp_path):
    path = tmp_path / "main.jsonl"
    path.write_bytes(line(row("p-1")) * 10)
    person("cura", Physician.Role.CURATOR)
    page = browser.new_page()
    log_in(page, live_server.url, "cura", "pw-cura")
    page.goto(live_server.url + "/curator/import/")
    page.evaluate("document.querySelector('form[data-upload-progress]').dataset.maxBytes = '1000'")
    posts: list[str] = []

    def note_post(request) -> None:
        if request.method == "POST":
            posts.append(request.url)

    page.on("request", note_post)
    page.set_input_files("#id_file", str(path))
    page.click("form[data-upload-progress] button[type=submit]")
    assert "main.jsonl is 0.0 MB; the browser import takes at most 0 MB" in page.inner_text("#upload-status")
    assert posts == []
    assert not Conversation.objects.exists()


def test_on_a_phone_the_result_takes_the_focus_and_the_menu_still_works(browser, live_server, tmp_path):
    path = tmp_path / "small.jsonl"
    path.write_bytes(b"".join(line(row(f"p-{i}")) for i in range(3)))
    person("cura", Physician.Role.CURATOR)
    page = browser.new_page(viewport={"width": 390, "height": 844})
    log_in(page, live_server.url, "cura", "pw-cura")
    page.goto(live_server.url + "/curator/import/")
    page.evaluate("document.body.dataset.kept = 'yes'")
    # The navigation is folded behind Menu, before and after the import.
    assert not page.locator("#site-nav").is_visible()
    page.set_input_files("#id_file", str(path))
    page.click("form[data-upload-progress] button[type=submit]")
    page.wait_for_selector("#import-summary")
    assert page.evaluate("document.body.dataset.kept") == "yes"
    assert page.evaluate("document.activeElement.closest('#import-summary h2') !== null")
    assert not page.locator("#site-nav").is_visible()
    heading_top = page.eval_on_selector("#import-summary h2", "e => e.getBoundingClientRect().top")
    assert 0 <= heading_top < 844
    page.wait_for_function("document.getElementById('announce').textContent.includes('3 rows')")
    page.click(".menu-toggle")
    assert page.get_attribute(".menu-toggle", "aria-expanded") == "true"
    assert page.locator("#site-nav").is_visible()
    # A second import from the same page works too: the form in the new region is live.
    page.click(".menu-toggle")
    page.set_input_files("#id_file", str(path))
    page.click("form[data-upload-progress] button[type=submit]")
    page.wait_for_function("document.getElementById('announce').textContent.includes('3 already known')")
    assert page.evaluate("document.body.dataset.kept") == "yes"
