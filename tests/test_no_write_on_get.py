"""Opening a page never writes: every page each role can reach by following links from its
home page and the API's root (and the redirects on the way) is fetched with GET, and no INSERT, UPDATE or DELETE
may reach the database meanwhile, nor may any table's row count change.

Three writes are a GET's by design and allowed: Django's session row (a message shown once is
taken out of the session), a finished run's kept numbers (grading.reports.stored: a cache
of what the grades already say, written by the first reader), a text's rendered Markdown
(annotation.services.rendered_markdown: a cache of what the text already says, written by its
first reader), a physician's task page noting that it was opened
(annotation.services.time_on_task: time on task, append-only; on a done task that counts in
the physician quality figures, so it also marks their refresh as wanted, which queues it:
annotation.services.quality_refresh, the marks only, never the figures), and a run recorded before the
rubric versions counting its drift baseline once (grading.drift: RunRubric rows and the run's
`drift_baseline`, what the grades already say, written by the first reader)."""

import re
from collections import deque
from urllib.parse import urljoin, urlsplit

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment, PhysicianQualityStore, RenderedMarkdown, TaskEvent
from annotation.services.labels import label_record
from grading.models import RunRubric, StoredReport
from tests.grading_data import imported_run
from tests.workspace import client_for, make_world, task

pytestmark = pytest.mark.django_db

ROLES = ["owner", "colleague", "outsider", "trial", "applicant", "removed", "curator", "researcher"]
WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
ALLOWED_TABLES = (
    "django_session",
    StoredReport._meta.db_table,
    RenderedMarkdown._meta.db_table,
    TaskEvent._meta.db_table,
    RunRubric._meta.db_table,
)
# The one column of the run a GET may set: its drift baseline, counted once (grading.drift).
ALLOWED_UPDATE = re.compile(r'^\s*UPDATE "grading_run" SET "drift_baseline" = ', re.IGNORECASE)
# A done task's page noting its opening marks the physician quality refresh as wanted.
STORE = PhysicianQualityStore._meta.db_table
ALLOWED_REFRESH_MARK = re.compile(
    rf'^\s*(UPDATE "{STORE}" SET "queued_at" = |INSERT INTO "{STORE}" \(id, requested_at, queued_at\) )',  # noqa: S608
    re.IGNORECASE,
)
LINK = re.compile(r'(?:href|hx-get)="([^"#]+)')
# Enough to reach every page of this world; a bound, so a link that makes links cannot loop.
MAX_PAGES = 250
# Query-string variants of one path (sorting, paging, filters): a few tell as much as all.
MAX_VARIANTS = 3
SKIP = ("/static/", "/admin/", "/logout/")
# The API lists runs by name without links: a finished run's own documents.
RUN_API = [f"/api/runs/imported/{part}" for part in ("", "report/", "meta-eval/", "grades/", "calibration/")]


def _row_counts() -> dict[str, int]:
    managed = {model._meta.db_table for model in apps.get_models() if model._meta.managed}
    tables = sorted(managed - {*ALLOWED_TABLES, STORE})
    quote = connection.ops.quote_name
    # Table names from the models, quoted: no outside text reaches the query.
    sql = "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {quote(table)})" for table in tables)  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return dict(zip(tables, cursor.fetchone(), strict=True))


def _writes(queries: list[dict]) -> list[str]:
    return [
        q["sql"]
        for q in queries
        if WRITE.match(q["sql"])
        and not any(table in q["sql"] for table in ALLOWED_TABLES)
        and not ALLOWED_UPDATE.match(q["sql"])
        and not ALLOWED_REFRESH_MARK.match(q["sql"])
    ]


def _links(base: str, html: str) -> list[str]:
    found = []
    for href in LINK.findall(html):
        url = urljoin(base, href.replace("&amp;", "&"))
        parts = urlsplit(url)
        if (
            (parts.netloc and parts.netloc != "testserver")
            or not parts.path.startswith("/")
            or parts.path.startswith(SKIP)
        ):
            continue
        found.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    return found


@pytest.fixture
def world():
    world = make_world()
    imported_run()
    # An item its physician may not label (they write its rubric): the page that once withdrew
    # it on opening.
    task(world.owner, Assignment.Kind.LABEL, world.a, response=world.responses[1], criterion=world.imported)
    # A done task, whose page its physician may open again.
    label_record(task=world.next_label_task, met=True)
    return world


@pytest.mark.parametrize("role", ROLES)
def test_no_page_writes_on_a_get(world, role):
    client = client_for(getattr(world, role))
    seen: set[str] = set()
    variants: dict[str, int] = {}
    queue = deque(["/", "/api/", *RUN_API])
    fetched: list[str] = []
    before = _row_counts()
    while queue and len(fetched) < MAX_PAGES:
        url = queue.popleft()
        path = url.split("?")[0]
        if url in seen or ("?" in url and variants.get(path, 0) >= MAX_VARIANTS):
            continue
        seen.add(url)
        variants[path] = variants.get(path, 0) + 1
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        fetched.append(url)
        assert _writes(captured.captured_queries) == [], f"GET {url} as {role} wrote"
        if response.status_code in (301, 302, 303) and response.get("Location"):
            queue.extend(_links(url, f'href="{response["Location"]}"'))
        elif "html" in response.get("Content-Type", "") and not getattr(response, "streaming", False):
            queue.extend(_links(url, response.content.decode()))
        elif "json" in response.get("Content-Type", "") and response.status_code == 200:
            # The API's links are absolute URLs among its values (the root, a page's "next").
            found = re.findall(r'"(http://testserver/[^"]*)"', response.content.decode())
            queue.extend(_links(url, "".join(f'href="{link}"' for link in found)))
    assert _row_counts() == before
    # The crawl reached the pages of the role, not the home page alone.
    assert len(fetched) >= 2, fetched


def test_the_crawl_would_see_a_write(world):
    """The check itself: the page that withdrew an item on a GET is seen writing on its POST."""
    item = Assignment.objects.get(physician=world.owner, kind=Assignment.Kind.LABEL)
    with CaptureQueriesContext(connection) as captured:
        client_for(world.owner).post(f"/labels/{item.code}/", {"withdraw": "yes"})
    assert any("UPDATE" in sql for sql in _writes(captured.captured_queries))
