import subprocess
import sys
from pathlib import Path

import pytest

# The browser walk's helpers assert on every page they check: let pytest explain their failures.
pytest.register_assert_rewrite("tests.browser_walk")

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO.parent / "shared" / "healthbench-samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def django_db_setup(request, django_test_environment, django_db_blocker):
    """pytest-django's fixture, with the database cloned from a migrated template rather than
    migrated every session (tests/database_template.py)."""
    from django.db import connection

    from tests.database_template import create_test_database

    verbosity = request.config.option.verbose
    with django_db_blocker.unblock():
        old_name = create_test_database(verbosity)
    yield
    with django_db_blocker.unblock():
        connection.creation.destroy_test_db(old_name, verbosity)


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings):
    # Hashing with the production hasher costs ~0.3 s per login; tests log in a lot.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _api_limits_out_of_the_way(settings):
    # Throttle counts live in the cache across tests, and test databases reuse user ids: one
    # test's launches must not use up another's. tests/test_api_limits.py sets its own rates.
    settings.API_RUN_LAUNCH_RATE = "100000/hour"
    settings.API_TOKEN_RATE = "100000/hour"


@pytest.fixture
def fast_retries(monkeypatch):
    """Grader calls retried after milliseconds, not seconds (test_llm_client checks the real delays)."""
    from grading.pipeline import client as llm

    monkeypatch.setattr(llm, "DEFAULT_RETRY", llm.RetryPolicy(base_delay=0.01, max_delay=0.05))


@pytest.fixture
def eager_tasks(fast_retries):
    """Celery tasks run inside the call that queues them, with fast retries."""
    from healthbench_web.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


@pytest.fixture(scope="session")
def migrated_var_dir(tmp_path_factory) -> Path:
    """A VAR_DIR whose SQLite database is migrated, for tests that run manage.py as a user does
    (a command on an unmigrated database stops at "run migrate first", before reading its file).
    Shared by the session: its commands only read the database or are refused."""
    var_dir = tmp_path_factory.mktemp("migrated-var")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=REPO,
        env={"VAR_DIR": str(var_dir), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
    )
    return var_dir


def sample_file(name: str) -> Path:
    """A file from the public HealthBench samples beside the repository, or skip."""
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"{path} is absent: the public samples are not on this machine")
    return path


CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser(monkeypatch):
    """Debian's Chromium driven by Playwright; skipped where it is not installed."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; the test's own
    # database calls are still synchronous, so Django's async guard does not apply.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def log_in(page, base_url: str, username: str, password: str) -> None:
    page.goto(base_url + "/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_load_state()
