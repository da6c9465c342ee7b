"""Text a physician is writing, kept on the server as they type, until they submit it."""

import re

from django.conf import settings
from django.db.models import Q

from annotation.models import Assignment, Criterion, Draft, Physician
from annotation.task_kinds import KINDS

# The fields that keep drafts, each its task kind's (`TaskKind.drafts`): an ideal response, a
# criterion being written or edited, a label comment.
FIELD_KIND = {field: kind.value for kind in KINDS.values() for field in kind.drafts}
# The longest text each field takes (its form's limit: annotation.forms.workspace).
MAX_LENGTH = {field: most for kind in KINDS.values() for field, most in kind.drafts.items()}
MAX_DRAFT = max(MAX_LENGTH.values())


def _fields(*, by_task_code: bool) -> str:
    return "|".join(
        re.escape(field) for kind in KINDS.values() if kind.by_task_code == by_task_code for field in kind.drafts
    )


# A field keyed by its conversation's code (a criterion's also by its id, or "new"), or by the
# task's own code for a kind whose tasks are reached that way.
KEY = re.compile(
    rf"^(?:(?P<kind>{_fields(by_task_code=False)}):(?P<conversation>[0-9a-f-]{{36}})(?::(?:new|(?P<criterion>\d{{1,12}})))?"
    rf"|(?P<field>{_fields(by_task_code=True)}):(?P<task>[0-9a-f-]{{36}}))$"
)


def draft_field_kind(match: re.Match[str]) -> str:
    """The task kind whose field a matched KEY names."""
    return FIELD_KIND[match["field"] or match["kind"]]


class DraftRefused(Exception):
    """A draft the server will not keep; the message says why, to the physician."""


def draft_key_allowed(*, physician: Physician, key: str) -> bool:
    """Whether `key` names a field of one of the physician's own open or done tasks.

    A criterion being edited must be one the physician wrote on that conversation's rubric (the
    only ones the editor opens), so made-up ids keep nothing.
    """
    match = KEY.match(key)
    if not match:
        return False
    tasks = Assignment.objects.filter(physician=physician).exclude(status__in=Assignment.INACTIVE)
    kind = draft_field_kind(match)
    if match["task"]:
        return tasks.filter(code=match["task"], kind=kind).exists()
    if not tasks.filter(Q(kind=kind), conversation__code=match["conversation"]).exists():
        return False
    if match["criterion"]:
        return Criterion.objects.filter(
            id=int(match["criterion"]),
            conversation__code=match["conversation"],
            author=physician,
            level=Criterion.Level.EXAMPLE,
        ).exists()
    return True


def draft_max_length(key: str) -> int:
    """The longest text the field named by `key` takes."""
    return MAX_LENGTH[key.split(":", 1)[0]]


def draft_save(*, physician: Physician, key: str, text: str) -> Draft:
    """Keep the draft of one field; refused past the field's length or the physician's number of drafts."""
    limit = draft_max_length(key)
    if len(text) > limit:
        raise DraftRefused(f"This field holds at most {limit:,} characters; the draft has {len(text):,}.")
    drafts = Draft.objects.filter(physician=physician)
    most = settings.DRAFTS_PER_PHYSICIAN
    # Counted before the insert without a lock: two tabs racing past the cap add one draft each
    # at most, which the next save counts.
    if not drafts.filter(key=key).exists() and drafts.count() >= most:
        raise DraftRefused(
            f"You have {most:,} unsubmitted drafts, the most the server keeps: submit or clear some "
            "before starting another. This text stays in your browser until then."
        )
    draft, _ = Draft.objects.update_or_create(physician=physician, key=key, defaults={"text": text})
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
