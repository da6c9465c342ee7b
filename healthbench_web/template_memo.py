"""`{% translate %}` and `{% url %}` of constant arguments, worked out once per language (or URL
configuration) instead of on every render.

A task page holds about a hundred `{% translate "..." %}` of fixed text and a dozen
`{% url 'name' %}` without arguments (the navigation): Django resolves each one again on every
request (a gettext through the active translation, an escape; a reverse through the resolver),
about 16 and 25 microseconds each, a millisecond or two a page. Their output depends only on the
active language (the translation catalogue) and the context's autoescaping, or on the URL
configuration, the script prefix and the current application; these nodes keep it per such key,
in the compiled template (the cached loader keeps it for the process). Anything else (a variable,
a filter, a message context) renders as Django renders it. The output is Django's own, byte for
byte (`tests/test_template_memo.py`).

Loaded after `django.templatetags.i18n` in TEMPLATES' builtins, so these tags replace Django's.
"""

import uuid

from django import template
from django.conf import settings
from django.core.signals import setting_changed
from django.template.base import FilterExpression
from django.template.defaulttags import URLNode
from django.template.defaulttags import url as django_url
from django.templatetags.i18n import TranslateNode
from django.templatetags.i18n import do_translate as django_translate
from django.urls import get_script_prefix, get_urlconf
from django.utils import translation
from django.utils.autoreload import file_changed

register = template.Library()

# Every memo of the process, so that a changed setting or catalogue empties them all.
_memos: list[dict] = []


def _memo() -> dict:
    memo: dict = {}
    _memos.append(memo)
    return memo


def forget(**kwargs) -> None:
    """Empty every memo: settings changed (tests), or a catalogue was compiled again (development)."""
    for memo in _memos:
        memo.clear()


def _catalogue_changed(sender, file_path, **kwargs) -> None:
    if file_path.suffix == ".mo":
        forget()


setting_changed.connect(forget, dispatch_uid="template_memo_forget")
# The development server reloads a compiled catalogue without restarting (Django's own receiver).
file_changed.connect(_catalogue_changed, dispatch_uid="template_memo_catalogue")
_MISSING = object()


def _constant(expression: FilterExpression) -> bool:
    """A literal without filters: `"text"` or `'name'`, never a variable."""
    return not expression.is_var and not expression.filters


class ConstantTranslateNode(TranslateNode):
    """`{% translate "fixed text" %}` (optionally `noop` or `as var`): one gettext per language."""

    def __init__(self, node: TranslateNode):
        super().__init__(node.filter_expression, node.noop, node.asvar, node.message_context)
        self.memo = _memo()

    def render(self, context):
        key = (translation.get_language(), context.autoescape)
        value = self.memo.get(key)
        if value is None:
            # Django's rendering, once; then only the assignment of `as var`, as Django does.
            asvar, self.asvar = self.asvar, None
            try:
                value = super().render(context)
            finally:
                self.asvar = asvar
            self.memo[key] = value
        if self.asvar:
            context[self.asvar] = value
            return ""
        return value


@register.tag("translate")
@register.tag("trans")
def do_translate(parser, token):
    node = django_translate(parser, token)
    # The text is a literal and Django resolves it with the same translate flag every time
    # (filter_expression.var is a Variable of a literal once TranslateNode wrapped it).
    var = node.filter_expression.var
    literal = getattr(var, "literal", None) is not None and not node.filter_expression.filters
    if literal and node.message_context is None:
        return ConstantTranslateNode(node)
    return node


class ConstantURLNode(URLNode):
    """`{% url 'name' %}` with literal arguments only (never `as var`): one reverse per URL configuration."""

    def __init__(self, node: URLNode):
        super().__init__(node.view_name, node.args, node.kwargs, node.asvar)
        self.memo = _memo()

    def render(self, context):
        # What Django's URLNode reads besides its arguments: the current application (the
        # request's, else its resolved namespace), the script prefix and the URL configuration.
        key = (_app(context), get_script_prefix(), get_urlconf() or settings.ROOT_URLCONF, context.autoescape)
        value = self.memo.get(key)
        if value is None:
            value = self.memo[key] = super().render(context)
        return value


# URLs of variable arguments (a task's code, a criterion's id), shared by every template: a page
# often shows one twice (a form's action and its hx-post). Emptied when it reaches the limit.
_reversed: dict = _memo()
# The arguments kept in the key: values whose text in a URL is their own (str(value)).
_PLAIN = (int, uuid.UUID)
REVERSED_LIMIT = 10_000


class ArgumentsURLNode(URLNode):
    """`{% url 'name' arg ... %}`: the arguments resolved on every render, the reverse kept per
    (arguments and their types, current application, script prefix, URL configuration)."""

    def render(self, context):
        args = [arg.resolve(context) for arg in self.args]
        kwargs = {k: v.resolve(context) for k, v in self.kwargs.items()}
        if not all(type(v) in _PLAIN or isinstance(v, str) for v in (*args, *kwargs.values())):
            return super().render(context)  # a model, a lazy object...: Django's way, every time
        key = (
            self.view_name.resolve(context),
            tuple((type(a), a) for a in args),
            tuple((k, type(v), v) for k, v in kwargs.items()),
            _app(context),
            get_script_prefix(),
            get_urlconf() or settings.ROOT_URLCONF,
            context.autoescape,
        )
        value = _reversed.get(key)
        if value is None:
            value = super().render(context)
            if len(_reversed) >= REVERSED_LIMIT:
                _reversed.clear()
            _reversed[key] = value
        return value


def _app(context):
    """What Django's URLNode takes as the current application: the request's, else its namespace."""
    request = getattr(context, "request", None)
    app = getattr(request, "current_app", _MISSING)
    if app is _MISSING:
        app = ("namespace", getattr(getattr(request, "resolver_match", None), "namespace", None))
    return app


@register.tag("url")
def url(parser, token):
    node = django_url(parser, token)
    if node.asvar:
        # `as var` keeps the URL unescaped and a missing name as "" (the admin's optional links): Django's.
        return node
    expressions = [node.view_name, *node.args, *node.kwargs.values()]
    if all(_constant(e) for e in expressions):
        return ConstantURLNode(node)
    return ArgumentsURLNode(node.view_name, node.args, node.kwargs, node.asvar)
