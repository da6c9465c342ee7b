"""What a task kind is: the one shape every kind module fills in (annotation.task_kinds
registers them). A kind is what a physician is given to do (`Assignment.Kind`): the page it is
done on and how an assignment reaches it, how its page finds the physician's own task and what
refuses it there, what an assignment of it gives out (its items), who may not receive it and
why, what assigning it takes back from others, the drafts its page keeps and the gold items
that can be given as it. Nothing outside a kind's module asks which kind a task is; it asks
the kind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from django.urls import reverse

from annotation.models import Assignment, Physician

Item = tuple[int, int | None, int | None]  # (conversation id, response id, criterion id)
# Per conversation, the physicians passed over for it, with the reason ("... and so may not label its responses").
Excluded = dict[int, dict[int, str]]


class TaskKind:
    """One kind of task. `value` is what `Assignment.kind` stores (Assignment.Kind lists the
    values the database accepts)."""

    value: str
    # The URL name of the page the task is done on.
    page: str
    # Whether that page is reached by the task's own code (a kind with one task per item of a
    # conversation), else by the conversation's code (one task per conversation).
    by_task_code: bool = False
    # The fields whose text its page keeps as drafts while the physician types, with the most
    # each takes (its form's limit: annotation.forms.workspace). A field is keyed by the
    # conversation's code, or by the task's own code for a kind reached that way
    # (annotation/services/text_drafts.py builds its keys from these).
    drafts: dict[str, int] = {}
    # The 404's words when the signed-in physician holds no such task.
    missing = "You have no such task"

    @property
    def label(self) -> str:
        return str(Assignment.Kind(self.value).label)

    def url(self, *, code, conversation_code) -> str:
        """The page of a task of this kind, from the task's code and its conversation's."""
        return reverse(self.page, args=[code if self.by_task_code else conversation_code])

    # Its page: the access rule.
    def own_task(self, physician: Physician, code) -> Assignment:
        """The physician's own task its page at `code` shows; Assignment.DoesNotExist (or
        ValueError for a malformed code) when they hold none. Cancelled and withdrawn tasks are
        off their list."""
        return (
            Assignment.objects.select_related("conversation")
            .exclude(status__in=Assignment.INACTIVE)
            .get(physician=physician, kind=self.value, conversation__code=code)
        )

    def conflict(self, task: Assignment) -> bool:
        """Whether its physician may not do this task although they hold it (the page says why)."""
        return False

    def closed(self, task: Assignment) -> str | None:
        """Why a done task can no longer be changed, or None when its page still takes changes."""
        return None

    # Giving it out: the assignment rule.
    def items(self, conversation_ids: Sequence[int]) -> list[Item]:
        """What an assignment of this kind over the conversations gives out, N physicians each."""
        return [(cid, None, None) for cid in conversation_ids]

    def excluded(self, conversation_ids: Sequence[int]) -> Excluded:
        """Per conversation, the physicians who may not receive this kind on it, and why."""
        return defaultdict(dict)

    def empty(self, conversation_ids: Sequence[int], items: Sequence[Item]) -> list[str]:
        """Conversations that give no item at all, each with why: said before anything is assigned."""
        return []

    def condition(self, condition: str) -> str:
        """What its tasks store as their condition, given the one the curator chose."""
        return ""

    def withdrawn_by(self, kind: str, pairs: Sequence[tuple[Item, int]]) -> int:
        """Tasks of this kind taken back because (item, physician) `pairs` of `kind` were just
        given out and made them impossible; how many."""
        return 0

    def gold_pool(self) -> list[Item]:
        """The gold items that can be given as tasks of this kind, oldest first."""
        return []
