"""The interface's own text is marked for translation, and marking it changed no rendered byte.

scripts/mark_translations.py wraps plain text in `{% translate "..." %}`; with no catalogue
for the language, Django renders that literal as it stands, so the English pages are the same.
A sentence with a value in it ("{{ n }} tasks left") is written by hand as `{% blocktranslate %}`
with named values (and `count` where a number decides the words);
`unmarked_sentences` finds one left outside, by a heuristic its docstring states."""

import importlib.util
import re

import pytest
from django.template import Context, Template

from tests.conftest import REPO

SPEC = importlib.util.spec_from_file_location("mark_translations", REPO / "scripts" / "mark_translations.py")
assert SPEC is not None
assert SPEC.loader is not None
marking = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(marking)
TEMPLATES = sorted((REPO / "healthbench_web" / "templates").rglob("*.html"))
MARK = re.compile(r"""\{% translate (?:"([^"]*)"|'([^']*)') %\}""")

SAMPLE = (
    '<h1>Label responses</h1>\n<p class="muted">Met &amp; not met · can\'t judge: <kbd>m</kbd> met,'
    ' <a href="/x" title="Go on" aria-label="Next item">next</a></p>\n'
    "{% if done %}Done.{% else %}{{ n }} left{% endif %} <code>id-1</code>\n"
    '<button value="yes" aria-label="Say \'yes\'">Yes, "met"</button><script>var s = "text";</script>\n'
    "<p>Two\nlines</p>{% comment %}Not shown{% endcomment %}"
)


def _unmarked(source: str) -> str:
    return MARK.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), source)


def test_marking_changes_no_rendered_text():
    marked = marking.mark(SAMPLE)
    assert marked.count("{% translate") == 8, marked
    assert "<p>{% blocktranslate %}Two\nlines{% endblocktranslate %}</p>" in marked
    context = Context({"done": False, "n": 3})
    assert Template(marked).render(context) == Template(SAMPLE).render(context)


def test_keys_identifiers_scripts_and_values_are_left_alone():
    marked = marking.mark(SAMPLE)
    for kept in ("<kbd>m</kbd>", "<code>id-1</code>", 'var s = "text";', 'value="yes"', "{{ n }} left"):
        assert kept in marked, kept


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_template_is_marked_and_its_marks_are_only_the_text(path):
    source = path.read_text()
    # Nothing left to mark: run scripts/mark_translations.py after adding text to a template.
    assert marking.mark(source) == source
    # Taking the marks out gives the text back, and marking it again gives this file.
    assert marking.mark(_unmarked(source)) == source


SENTENCES = (
    "<p>{{ n }} task{{ n|pluralize }} left · <b>{{ run.name }}</b> ({{ share }}%)</p>"
    '<a href="{{ url }}" aria-label="Open {{ run.name }}">{{ run.name }}</a> {% widthratio a 1 100 %}% off'
)
SENTENCES_MARKED = (
    "<p>{% blocktranslate count counter=n %}{{ counter }} task left{% plural %}{{ counter }} tasks left"
    "{% endblocktranslate %} · <b>{{ run.name }}</b> ({{ share }}%)</p>"
    '<a href="{{ url }}" aria-label="{% blocktranslate with name=run.name %}Open {{ name }}{% endblocktranslate %}">'
    "{{ run.name }}</a> {% widthratio a 1 100 as off %}{% blocktranslate %}{{ off }}% off{% endblocktranslate %}"
)


def test_a_sentence_with_a_value_outside_blocktranslate_is_found():
    found = marking.unmarked_sentences(SENTENCES)
    assert found == ["task", "left ·", "Open {{ run.name }}", "% off"]


def test_a_value_beside_punctuation_or_inside_blocktranslate_is_no_sentence():
    assert marking.unmarked_sentences(SENTENCES_MARKED) == []


@pytest.mark.parametrize("n", [0, 1, 2])
def test_blocktranslate_renders_the_same_english(n):
    context = {"n": n, "run": {"name": "R&D <1>"}, "share": 12.5, "url": "/r/1", "a": 0.25}
    assert Template(SENTENCES_MARKED).render(Context(context)) == Template(SENTENCES).render(Context(context))


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_template_leaves_a_sentence_with_a_value_outside_blocktranslate(path):
    assert marking.unmarked_sentences(path.read_text()) == []
