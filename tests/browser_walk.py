"""The browser walk's shared parts: one Chromium per module, a signed-in visitor per window, and the
checks every page and state gets (no sideways scrolling, and axe-core finding no WCAG 2.0/2.1 A or
AA violation, nor a best-practice one).

axe-core comes inside the locked axe-playwright-python package; nothing is fetched.
"""

import io
import os
import time
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connections

from annotation.models import Physician
from tests.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

PASSWORD = "pw-workflow"
WIDTHS = [1366, 390]
SHOTS = ARTIFACTS / "workflow"
AXE_OPTIONS = {
    "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]},
    "resultTypes": ["violations"],
}

browser_marks = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install -y chromium)"
    ),
]


class Checked:
    """Every page and state the walk checked, and how long axe took: printed at the end of a module."""

    states: list[str] = []
    axe_seconds = 0.0


@pytest.fixture(scope="module")
def chromium() -> Iterator:
    """One browser for the whole module: starting Chromium costs more than most of these tests."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls between browser
    # steps are plain synchronous code, so allow them.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    SHOTS.mkdir(parents=True, exist_ok=True)
    Checked.states, Checked.axe_seconds = [], 0.0
    started = time.monotonic()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before
        print(
            f"\nbrowser walk: {len(Checked.states)} pages and states checked with axe-core in "
            f"{Checked.axe_seconds:.1f} s of {time.monotonic() - started:.1f} s"
        )


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    # ORM calls made while Playwright runs use a connection of their own; close it, or
    # PostgreSQL refuses to drop the test database at the end of the session.
    connections.close_all()


@pytest.fixture
def demo() -> dict[str, Physician]:
    call_command("load_demo", password=PASSWORD, stdout=io.StringIO())
    return {p.user.username: p for p in Physician.objects.select_related("user")}


def axe_script() -> str:
    from axe_playwright_python.base import AXE_SCRIPT

    return AXE_SCRIPT


def axe_violations(page) -> list[dict]:
    """axe-core's violations on the page as it is now (the script is put in every page of the context)."""
    started = time.monotonic()
    found = page.evaluate("options => axe.run(document, options).then(r => r.violations)", AXE_OPTIONS)
    Checked.axe_seconds += time.monotonic() - started
    return found


def describe(violations: list[dict]) -> str:
    return "\n".join(
        f"{v['id']} ({v['impact']}): {v['help']}\n"
        + "\n".join(f"    {n['target']}: {n['html'][:160]}" for n in v["nodes"])
        for v in violations
    )


class Visitor:
    """One signed-in person in one browser window of a given width."""

    def __init__(self, chromium, live_server, username: str, width: int, **context):
        self.width = width
        self.base = live_server.url
        self.username = username
        self.context = chromium.new_context(viewport={"width": width, "height": 900}, **context)
        # axe-core from the locked package, in every page this window opens (sent once, not per check).
        self.context.add_init_script(axe_script())
        self.page = self.context.new_page()
        self.page.set_default_timeout(10_000)
        self.log_in()

    def log_in(self, *, at: str = "/login/") -> None:
        if at:
            self.page.goto(self.base + at)
        self.page.fill("#id_username", self.username)
        self.page.fill("#id_password", PASSWORD)
        self.page.click("button[type=submit]")
        self.page.wait_for_load_state()
        self.check("logged in")

    def go(self, path: str):
        self.page.goto(self.base + path)
        self.check()
        return self.page

    def check(self, state: str = "") -> None:
        """The page as it is now: no wider than the window, and nothing for axe-core to report."""
        page = self.page
        page.wait_for_load_state()
        wide = page.evaluate("document.documentElement.scrollWidth")
        where = f"{page.url} ({state or 'loaded'}, {self.width} px)"
        assert wide <= self.width, f"{where} is {wide} px wide"
        found = axe_violations(page)
        assert not found, f"axe-core on {where}:\n{describe(found)}"
        Checked.states.append(where)

    def text(self, selector: str = "main") -> str:
        return self.page.inner_text(selector)

    def focused(self) -> str:
        """What has the focus: tag, id and the first words of its text."""
        return self.page.evaluate(
            "(() => { const e = document.activeElement;"
            " return e ? `${e.tagName}#${e.id} ${e.textContent.trim().slice(0, 60)}` : '' })()"
        )

    def wait_focus(self, selector: str) -> str:
        """Wait until the focus is on an element matching `selector` (htmx settles after the swap)."""
        self.page.wait_for_function(
            "s => document.activeElement && document.activeElement.matches(s)", arg=selector, timeout=5000
        )
        return self.focused()

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(SHOTS / f"{self.username}-{name}-{self.width}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visit(chromium, live_server, demo):
    opened: list[Visitor] = []

    def open_as(username: str, width: int, **context) -> Visitor:
        visitor = Visitor(chromium, live_server, username, width, **context)
        opened.append(visitor)
        return visitor

    yield open_as
    for visitor in opened:
        visitor.close()


def physician_named(username: str) -> Physician:
    return User.objects.get(username=username).physician
