"""Text a physician is writing, kept on the server as they type, until they submit it."""

import re

from django.db.models import Q

from annotation.models import Assignment, Draft, Physician

# The fields that keep drafts: an ideal response, a criterion being written or edited, a label comment.
KEY = re.compile(
    r"^(?:(?P<kind>ideal|criterion):(?P<conversation>[0-9a-f-]{36})(?::(?:new|\d{1,12}))?"
    r"|label-comment:(?P<task>[0-9a-f-]{36}))$"
)
# The longest text any of those fields takes (the ideal response's form limit).
MAX_DRAFT = 20000
TASK_KIND = {"ideal": Assignment.Kind.IDEAL_RESPONSE, "criterion": Assignment.Kind.RUBRIC}


def draft_key_allowed(*, physician: Physician, key: str) -> bool:
    """Whether `key` names a field of one of the physician's own open or done tasks."""
    match = KEY.match(key)
    if not match:
        return False
    tasks = Assignment.objects.filter(physician=physician).exclude(status__in=Assignment.INACTIVE)
    if match["task"]:
        return tasks.filter(code=match["task"], kind=Assignment.Kind.LABEL).exists()
    kind = TASK_KIND[match["kind"]]
    return tasks.filter(Q(kind=kind), conversation__code=match["conversation"]).exists()


def draft_save(*, physician: Physician, key: str, text: str) -> Draft:
    draft, _ = Draft.objects.update_or_create(physician=physician, key=key, defaults={"text": text[:MAX_DRAFT]})
    return draft


def draft_discard(*, physician: Physician, key: str) -> None:
    """The text was submitted (or emptied): its draft has done its work."""
    Draft.objects.filter(physician=physician, key=key).delete()


def draft_text(*, physician: Physician, key: str) -> str | None:
    return Draft.objects.filter(physician=physician, key=key).values_list("text", flat=True).first()


def ideal_key(conversation_code) -> str:
    return f"ideal:{conversation_code}"


def criterion_key(conversation_code, criterion_id: int | None = None) -> str:
    return f"criterion:{conversation_code}:{criterion_id or 'new'}"


def label_comment_key(task_code) -> str:
    return f"label-comment:{task_code}"
