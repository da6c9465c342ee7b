from django import template

from annotation.access import role_of

register = template.Library()


@register.filter
def role(user) -> str:
    """The user's role in the programme ('' for none): which links the navigation offers."""
    return role_of(user) or ""
