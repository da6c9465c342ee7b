"""Each stored text's Markdown rendered once, not on every request.

Rendering (healthbench_web/markdown_text.py: markdown-it-py, then nh3) costs about a
millisecond per text, and a task page shows dozens: every turn of the conversation, the
response, the criteria, the guideline. The HTML is kept in RenderedMarkdown under a hash of
the text and of the renderer, so a text that changes (an edited criterion, a new response)
or a renderer that changes (its allowlist, its library versions) is simply a new key: there
is nothing to invalidate and no stale HTML to show.

A page asks for all its texts at once (`markdown_prefetch`, one query; the texts not yet
rendered are rendered and stored); the `markdown` template filter then finds each in this
process's cache (`markdown_cached`). A text the page did not prefetch is rendered as before,
so a page that forgets costs time, never correctness.
"""

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

from healthbench_web import markdown_text
from healthbench_web.markdown_text import markdown_html

# Characters of HTML kept in each process: the texts of the pages being worked on, and the
# shared ones (the consensus catalogue, the guidelines) that every page shows.
CACHE_CHARACTERS = 16_000_000


@lru_cache(maxsize=1)
def _renderer() -> bytes:
    """What the HTML depends on besides the text: the renderer's source and its libraries' versions."""
    source = Path(markdown_text.__file__).read_bytes()
    return hashlib.sha256(source + f"|{version('markdown-it-py')}|{version('nh3')}|".encode()).digest()


def markdown_digest(text: str) -> str:
    """The store's key of a text: it changes when the text or the renderer changes."""
    return hashlib.blake2b(text.encode(errors="surrogatepass"), digest_size=32, key=_renderer()).hexdigest()


class _Cache:
    """An LRU map of digest -> HTML, bounded by characters; shared by a process's threads."""

    def __init__(self, limit: int):
        self.limit = limit
        self.size = 0
        self.items: OrderedDict[str, str] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self.lock:
            html = self.items.get(key)
            if html is not None:
                self.items.move_to_end(key)
            return html

    def put(self, key: str, html: str) -> None:
        with self.lock:
            if key in self.items:
                return
            self.items[key] = html
            self.size += len(html)
            while self.size > self.limit and len(self.items) > 1:
                _, dropped = self.items.popitem(last=False)
                self.size -= len(dropped)

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.size = 0


_cache = _Cache(CACHE_CHARACTERS)


def markdown_cached(text: object) -> str:
    """The safe HTML of a text: from this process's cache when a page prefetched it, else rendered now."""
    if text is None:
        return ""
    text = str(text)
    key = markdown_digest(text)
    html = _cache.get(key)
    if html is None:
        html = markdown_html(text)
        _cache.put(key, html)
    return html


def markdown_prefetch(texts: Iterable[object]) -> None:
    """Bring a page's texts into this process's cache: one query for those rendered before,
    and the others rendered now and stored for every later reader."""
    from annotation.models import RenderedMarkdown

    wanted: dict[str, str] = {}
    for text in texts:
        if text is None:
            continue
        key = markdown_digest(str(text))
        if _cache.get(key) is None:
            wanted[key] = str(text)
    if not wanted:
        return
    for key, html in _stored(list(wanted)):
        _cache.put(key, html)
        del wanted[key]
    if not wanted:
        return
    rendered = [RenderedMarkdown(digest=key, html=markdown_html(text)) for key, text in wanted.items()]
    # Two readers of a new text may both render it: the second insert is a no-op.
    RenderedMarkdown.objects.bulk_create(rendered, ignore_conflicts=True)
    for row in rendered:
        _cache.put(row.digest, row.html)


def _stored(digests: list[str]) -> list[tuple[str, str]]:
    """(digest, html) of the digests stored: `filter(digest__in=...).values_list("digest", "html")`
    in plain SQL, as its list of keys changes length with every page and cannot be compiled once."""
    from django.db import connections, router

    from annotation.models import RenderedMarkdown
    from healthbench_web.compiled_query import column

    alias = router.db_for_read(RenderedMarkdown)
    connection = connections[alias]
    quote = connection.ops.quote_name
    meta = RenderedMarkdown._meta
    digest, html = (quote(column(RenderedMarkdown, name)) for name in ("digest", "html"))
    found: list[tuple[str, str]] = []
    # Within SQLite's limit of parameters per statement.
    for start in range(0, len(digests), 500):
        chunk = digests[start : start + 500]
        places = ", ".join(["%s"] * len(chunk))
        with connection.cursor() as cursor:
            # Only quoted column and table names and placeholders are formatted in: the values are parameters.
            sql = f"SELECT {digest}, {html} FROM {quote(meta.db_table)} WHERE {digest} IN ({places})"  # noqa: S608
            cursor.execute(sql, chunk)
            found.extend(cursor.fetchall())
    return found


def markdown_fill(texts: Iterable[str], *, batch: int = 500) -> int:
    """Render and store every text not stored yet (a data set imported before the store, or in
    bulk); returns how many were rendered. Pages fill the store anyway, one text at a time."""
    from annotation.models import RenderedMarkdown

    done = 0
    chunk: dict[str, str] = {}

    def flush() -> int:
        known = set(RenderedMarkdown.objects.filter(digest__in=list(chunk)).values_list("digest", flat=True))
        rows = [RenderedMarkdown(digest=k, html=markdown_html(t)) for k, t in chunk.items() if k not in known]
        RenderedMarkdown.objects.bulk_create(rows, ignore_conflicts=True)
        chunk.clear()
        return len(rows)

    for text in texts:
        chunk[markdown_digest(text)] = text
        if len(chunk) >= batch:
            done += flush()
    if chunk:
        done += flush()
    return done


def markdown_cache_clear() -> None:
    """Forget this process's cache (tests: the store's rows go with each test's transaction)."""
    _cache.clear()
