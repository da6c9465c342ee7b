"""`{% translate %}` and `{% url %}` of constant arguments are kept per language and URL
configuration (healthbench_web/template_memo.py): what they render is Django's own output, in
every language, with or without autoescaping, and after the language or the URLs change."""

import uuid

import pytest
from django.http import HttpResponse
from django.template import Context, Engine, RequestContext
from django.test import RequestFactory, override_settings
from django.urls import path
from django.utils import translation

from healthbench_web.template_memo import ArgumentsURLNode, ConstantTranslateNode, ConstantURLNode

SOURCE = (
    '{% translate "Log out" %}|{% translate "Password" as word %}[{{ word }}]|{% translate "Menu" noop %}|'
    '{% translate "Tom & Jerry <b>" %}|{% translate "100%% sure" %}|'
    "{% url 'home' %}|{% url 'label_next' as where %}[{{ where }}]|{% url 'guideline_read' 'label' %}|"
    "{% url 'admin:index' %}|{% translate word %}|{% url 'label_item' code %}|{% url 'label_item' code %}|"
    "{% url 'label_item' uuid %}|{% url 'criterion_edit' code number %}|{% url 'nowhere' as missing %}[{{ missing }}]"
)
CONTEXT = {"code": "3f2c9a52-8b0e-4a3e-9d1f-6f0a2b1c4d5e", "uuid": uuid.UUID(int=7), "number": 12}


def _ours():
    return Engine.get_default().from_string(SOURCE)


def _djangos():
    # The same engine without the memo: Django's own i18n and url tags.
    return Engine(builtins=["django.templatetags.i18n"], libraries={}).from_string(SOURCE)


def _render(template, *, autoescape: bool = True) -> str:
    return template.render(Context(CONTEXT, autoescape=autoescape))


def test_constant_tags_are_the_memo_s_and_the_rest_django_s():
    nodes = [type(n).__name__ for n in _ours().nodelist]
    assert nodes.count(ConstantTranslateNode.__name__) == 5
    assert nodes.count(ConstantURLNode.__name__) == 3
    assert nodes.count(ArgumentsURLNode.__name__) == 4
    # A variable's translation, and a URL kept `as var` (unescaped, "" when missing), are Django's.
    assert nodes.count("TranslateNode") == 1
    assert nodes.count("URLNode") == 2


@pytest.mark.parametrize("autoescape", [True, False])
def test_each_language_renders_as_django_renders_it(autoescape):
    ours = _ours()  # one template through every language and back: its memo serves each its own
    for language in ["en", "fr", "de", "en", "fr"]:
        with translation.override(language):
            expected = _render(_djangos(), autoescape=autoescape)
            assert _render(ours, autoescape=autoescape) == expected
            assert _render(ours, autoescape=autoescape) == expected  # from the memo
        if language == "fr":
            assert "Déconnexion" in expected  # Django's own French catalogue: the language is really used


urlpatterns = [path("elsewhere/", lambda request: HttpResponse(), name="home")]


def test_changed_urls_are_not_served_from_the_memo():
    template = Engine.get_default().from_string("{% url 'home' %}")
    assert template.render(Context({})) == "/"
    with override_settings(ROOT_URLCONF=__name__):
        assert template.render(Context({})) == "/elsewhere/"
    assert template.render(Context({})) == "/"
    assert _render(_ours()) == _render(_djangos())


def test_the_current_application_is_part_of_the_key():
    template = Engine.get_default().from_string("{% url 'admin:index' %}")
    request = RequestFactory().get("/")
    request.current_app = "admin"
    expected = Engine().from_string("{% url 'admin:index' %}")
    for app in ("admin", None):
        request.current_app = app  # type: ignore[assignment]
        context = RequestContext(request, {})
        assert template.render(context) == expected.render(RequestContext(request, {}))
