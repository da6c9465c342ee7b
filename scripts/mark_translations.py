"""Mark the interface's own text in the templates for translation, without changing a rendered byte.

Each piece of plain text between tags (and each plain aria-label, title, placeholder and alt)
becomes `{% translate "..." %}`, and text over several lines `{% blocktranslate %}`; with no
catalogue for the language, Django renders the text as it stands (not escaped), so the English
pages stay exactly as they were. Left alone: text beside a `{{ variable }}` or an output tag (a
sentence with a value in it needs a `{% blocktranslate %}` written by hand), one line holding both
kinds of quote or a backslash, and everything inside <script>, <style>, <textarea>, <kbd>, <code>,
comments, `{% verbatim %}` and `{% blocktranslate %}`. Running it again changes nothing, so it can be
run after a merge instead of resolving the marks by hand.

It also lists the sentences with a value in them that are still outside a `{% blocktranslate %}`
(see `unmarked_sentences`); those it cannot rewrite, and it exits 1 while any is left.

Usage: python scripts/mark_translations.py [--check] [healthbench_web/templates/ ...]
"""

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ATTRIBUTES = ("aria-label", "title", "placeholder", "alt")
# Tags that print nothing themselves or a whole translated sentence: text beside them is whole text.
CONTROL = {
    "if", "elif", "else", "endif", "for", "empty", "endfor", "with", "endwith", "block", "endblock",
    "partialdef", "endpartialdef", "partial", "include", "extends", "load", "spaceless", "endspaceless",
    "translate", "trans", "blocktranslate", "blocktrans", "csrf_token",
}  # fmt: skip
# Keys to press and identifiers stay as they are in every language.
SKIP_ELEMENTS = ("script", "style", "textarea", "kbd", "code")
SKIP_BLOCKS = {"comment": "endcomment", "verbatim": "endverbatim", "blocktranslate": "endblocktranslate",
               "blocktrans": "endblocktrans"}  # fmt: skip
LETTER = re.compile(r"[A-Za-z]")
WORD = re.compile(r"[A-Za-z]{2,}")
ATTRIBUTE = re.compile(r"(\s(?:" + "|".join(ATTRIBUTES) + r')=")([^"{}<>]*)(")')
VALUED_ATTRIBUTE = re.compile(r"\s(?:" + "|".join(ATTRIBUTES) + r')="((?:[^"{]|\{\{.*?\}\}|\{%.*?%\}|\{)*)"')
BLOCKTRANSLATE = re.compile(r"\{% blocktrans(?:late)?\b.*?\{% endblocktrans(?:late)? %\}", re.DOTALL)
TEMPLATE_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}")


def _tokens(source: str) -> list[tuple[str, str]]:
    """(kind, text) in order: 'tag' {% %}, 'var' {{ }}, 'comment' {# #}, 'html' <...>, 'text'."""
    tokens, i, n = [], 0, len(source)
    while i < n:
        two = source[i : i + 2]
        if two in ("{%", "{{", "{#"):
            end = source.find({"{%": "%}", "{{": "}}", "{#": "#}"}[two], i + 2)
            end = n if end < 0 else end + 2
            tokens.append(({"{%": "tag", "{{": "var", "{#": "comment"}[two], source[i:end]))
            i = end
        elif source[i] == "<" and i + 1 < n and (source[i + 1].isalpha() or source[i + 1] in "/!"):
            j = i + 1
            while j < n and source[j] != ">":
                if source[j : j + 2] in ("{%", "{{", "{#"):
                    close = source.find({"{%": "%}", "{{": "}}", "{#": "#}"}[source[j : j + 2]], j + 2)
                    j = n if close < 0 else close + 2
                else:
                    j += 1
            tokens.append(("html", source[i : j + 1]))
            i = j + 1
        else:
            j = i
            while (
                j < n
                and source[j : j + 2] not in ("{%", "{{", "{#")
                and not (source[j] == "<" and j + 1 < n and (source[j + 1].isalpha() or source[j + 1] in "/!"))
            ):
                j += 1
            tokens.append(("text", source[i:j]))
            i = j
    return tokens


def _tag_name(token: str) -> str:
    parts = token[2:-2].split()
    return parts[0] if parts else ""


def _literal(text: str) -> str | None:
    """`{% translate "text" %}`, or None when the text cannot be a plain literal.

    Text over several lines is `{% blocktranslate %}` instead, which keeps its line breaks and
    indentation as they are (no `trimmed`), so the page is the same."""
    if "%}" in text or "{" in text:
        return None
    if "\n" in text:
        return "{% blocktranslate %}" + text + "{% endblocktranslate %}"
    if "\\" in text:
        return None
    if '"' not in text:
        return '{% translate "' + text + '" %}'
    if "'" not in text:
        return "{% translate '" + text + "' %}"
    return None


def _prints(kind: str, token: str) -> bool:
    """Whether a neighbour puts text into the sentence (a value, or a tag that prints)."""
    if kind != "tag":
        return kind == "var"
    parts = token[2:-2].split()
    # `{% widthratio a b 100 as share %}` stores its value instead of printing it.
    stores = len(parts) > 2 and parts[-2] == "as"
    return _tag_name(token) not in CONTROL and not token.startswith("{% end") and not stores


def _mark_text(text: str) -> str:
    core = text.strip()
    if len(core) < 2 or not LETTER.search(core) or (core.startswith("&") and core.endswith(";")):
        return text
    marked = _literal(core)
    if marked is None:
        return text
    start = text.index(core)
    return text[:start] + marked + text[start + len(core) :]


def _mark_attributes(tag: str) -> str:
    def one(match: re.Match) -> str:
        value = match.group(2)
        if not LETTER.search(value) or "'" in value or "\\" in value:
            return match.group(0)
        return f"{match.group(1)}{{% translate '{value}' %}}{match.group(3)}"

    return ATTRIBUTE.sub(one, tag)


def _walk(tokens: list[tuple[str, str]]):
    """(index, kind, token, open) for each token; `open` is False inside what is never marked."""
    skip_until, element = None, None
    for index, (kind, token) in enumerate(tokens):
        if skip_until is not None:
            if kind == "tag" and _tag_name(token) == skip_until:
                skip_until = None
            yield index, kind, token, False
            continue
        if element is not None:
            if kind == "html" and token.lower().startswith(f"</{element}"):
                element = None
            yield index, kind, token, False
            continue
        if kind == "tag" and _tag_name(token) in SKIP_BLOCKS:
            skip_until = SKIP_BLOCKS[_tag_name(token)]
            yield index, kind, token, False
            continue
        if kind == "html":
            name = re.match(r"<\s*([A-Za-z0-9-]+)", token)
            if name and name.group(1).lower() in SKIP_ELEMENTS and not token.endswith("/>"):
                element = name.group(1).lower()
        yield index, kind, token, True


def _neighbours(tokens: list[tuple[str, str]], index: int) -> tuple[tuple[str, str], tuple[str, str]]:
    before = tokens[index - 1] if index else ("html", "")
    after = tokens[index + 1] if index + 1 < len(tokens) else ("html", "")
    return before, after


def mark(source: str) -> str:
    tokens = _tokens(source)
    out = []
    for index, kind, token, open_ in _walk(tokens):
        if open_ and kind == "html":
            token = _mark_attributes(token)
        elif open_ and kind == "text":
            before, after = _neighbours(tokens, index)
            if not _prints(*before) and not _prints(*after):
                token = _mark_text(token)
        out.append(token)
    return "".join(out)


def unmarked_sentences(source: str) -> list[str]:
    """Sentences with a value in them left outside `{% blocktranslate %}`, which `mark` cannot fix.

    A heuristic: a run of text holding a word (two letters or more) next to a `{{ value }}` or a
    tag that prints (`{% widthratio %}`; `... as name` prints nothing), outside what is never
    marked; and an aria-label, title, placeholder or alt that holds a value and a word outside a
    `{% blocktranslate %}`. Punctuation or symbols beside a value ("({{ n }})", "{{ a }} · {{ b }}")
    are not a sentence. Write these by hand: `{% blocktranslate with name=run.name %}`, and
    `count counter=...` with `{% plural %}` where a number decides the words."""
    tokens = _tokens(source)
    found = []
    for index, kind, token, open_ in _walk(tokens):
        if not open_:
            continue
        if kind == "text" and WORD.search(token) and any(_prints(*n) for n in _neighbours(tokens, index)):
            found.append(token.strip())
        elif kind == "html":
            for value in VALUED_ATTRIBUTE.findall(token):
                outside = BLOCKTRANSLATE.sub("", value)
                if "{{" in outside and WORD.search(TEMPLATE_TAG.sub("", outside)):
                    found.append(value)
    return found


def main(argv: list[str]) -> int:
    check = "--check" in argv
    roots = [Path(a) for a in argv if a != "--check"] or [REPO / "healthbench_web" / "templates"]
    changed = []
    for root in roots:
        for path in sorted(root.rglob("*.html")) if root.is_dir() else [root]:
            source = path.read_text()
            marked = mark(source)
            if marked != source:
                changed.append(path)
                if not check:
                    path.write_text(marked)
    for path in changed:
        print(("unmarked text in " if check else "marked ") + str(path))
    sentences = [(path, s) for root in roots for path in (sorted(root.rglob("*.html")) if root.is_dir() else [root])
                 for s in unmarked_sentences(path.read_text())]  # fmt: skip
    for path, sentence in sentences:
        print(f"sentence with a value outside blocktranslate in {path}: {sentence[:70]!r}")
    return 1 if (check and changed) or sentences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
