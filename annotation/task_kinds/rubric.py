"""Writing a conversation's rubric: one task per conversation, done on the rubric editor, whose
criteria are kept as drafts while typed. A submitted rubric is closed. Its writers (and the
conversation's author, and every author of its criteria) never label its responses: the
labeling kind asks `writers` and `writes`, and withdraws its open tasks of a new writer."""

from collections import defaultdict
from collections.abc import Sequence

from django.db.models import Q

from annotation.models import Assignment, Conversation, Criterion, Physician
from annotation.task_kinds.base import TaskKind


class Rubric(TaskKind):
    value = Assignment.Kind.RUBRIC
    page = "rubric_editor"
    drafts = {"criterion": 2000}

    def closed(self, task: Assignment) -> str | None:
        return "This rubric was submitted and can no longer be changed." if task.is_done else None


KIND = Rubric()


def writers(conversation_ids: Sequence[int]) -> dict[int, set[int]]:
    """Per conversation, the physicians who wrote it or its rubric: never its labelers."""
    found: dict[int, set[int]] = defaultdict(set)
    for cid, pid in Criterion.objects.filter(conversation_id__in=conversation_ids, author__isnull=False).values_list(
        "conversation_id", "author_id"
    ):
        found[cid].add(pid)
    for cid, pid in Assignment.objects.filter(conversation_id__in=conversation_ids, kind=KIND.value).values_list(
        "conversation_id", "physician_id"
    ):
        found[cid].add(pid)
    for cid, pid in Conversation.objects.filter(id__in=conversation_ids, author__isnull=False).values_list(
        "id", "author_id"
    ):
        found[cid].add(pid)
    return found


def writes(*, physician: Physician, conversation: Conversation) -> bool:
    """Whether the physician wrote the conversation, one of its criteria, or holds its rubric task."""
    if conversation.author_id == physician.id:
        return True
    return (
        Conversation.objects.filter(id=conversation.id)
        .filter(Q(criteria__author=physician) | Q(assignments__physician=physician, assignments__kind=KIND.value))
        .exists()
    )
