"""Markdown as people read it: responses, ideal responses, criteria and guidelines, formatted and safe.

The stored text never changes; only its display does. markdown-it-py parses CommonMark (plus
tables and strikethrough) with raw HTML off, so a `<script>` in a response is shown as text;
nh3, the Ammonia sanitiser, then keeps only the tags and attributes listed here, as a second
wall should a parser bug ever let markup through. Headings inside a text become bold
paragraphs: a response's "# Summary" must not break the page's own outline of headings.

Every block carries `dir="auto"`: each paragraph, list item or cell takes its direction from its
own first strong character, so an Arabic or Hebrew paragraph reads right to left beside an
English one, and its punctuation ("(Benadryl 25 mg?)") stays where its writer put it.
"""

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

TAGS = {
    "p",
    "br",
    "strong",
    "em",
    "del",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "hr",
    "a",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
# Blocks whose direction comes from their own text (dir="auto"), set by the renderer below.
DIRECTED = ("p", "ul", "ol", "li", "blockquote", "table", "th", "td")
ATTRIBUTES = {
    **{tag: {"dir"} for tag in DIRECTED},
    "a": {"href", "title"},
    "ol": {"start", "dir"},
    "th": {"style", "dir"},
    "td": {"style", "dir"},
    "p": {"class", "dir"},
}
# markdown-it's opening tokens of those blocks.
DIRECTED_TOKENS = frozenset(
    {
        "paragraph_open",
        "bullet_list_open",
        "ordered_list_open",
        "list_item_open",
        "blockquote_open",
        "table_open",
        "th_open",
        "td_open",
    }
)
URL_SCHEMES = {"http", "https", "mailto"}
# markdown-it aligns table cells with an inline style; nothing else may be styled.
STYLE_PROPERTIES = {"text-align"}


def _heading_open(self, tokens, idx, options, env) -> str:
    return '<p class="md-heading" dir="auto"><strong>'


def _directions(state) -> None:
    """dir="auto" on every block, so each takes the direction of its own text."""
    for token in state.tokens:
        if token.type in DIRECTED_TOKENS:
            token.attrSet("dir", "auto")


def _heading_close(self, tokens, idx, options, env) -> str:
    return "</strong></p>\n"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
        ["table", "strikethrough"]
    )
    # Images would make the reader's browser fetch any address a response names.
    parser.disable("image")
    parser.add_render_rule("heading_open", _heading_open)
    parser.add_render_rule("heading_close", _heading_close)
    parser.core.ruler.push("dir_auto", _directions)
    return parser


def markdown_html(text: object) -> str:
    """Safe HTML for a Markdown text ("" for None); anything not on the allowlist is dropped."""
    if text is None:
        return ""
    html = _parser().render(str(text))
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        filter_style_properties=STYLE_PROPERTIES,
    )
