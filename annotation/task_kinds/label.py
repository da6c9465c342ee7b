"""Labeling: does a model response meet a consensus criterion? One task per (response,
criterion) item, each reached by its own code on the label page, its comment kept as a draft.
Nobody labels responses against a rubric they wrote (the rubric kind's `writers`), nor a
conversation on which they still have an open vote task (the label page shows the consensus
criteria attached because others agreed); a task that became impossible after it was given out
is withdrawn, with a note for the curator."""

import uuid
from collections import defaultdict
from collections.abc import Sequence

from annotation.grading_seam import Response, model_responses
from annotation.models import Assignment, Conversation, Criterion, GoldItem, Physician
from annotation.task_kinds import rubric
from annotation.task_kinds.base import Excluded, Item, TaskKind, as_uuid
from healthbench_web.compiled_query import CompiledQuery, sentinels

# The label page's lookup, on every request and answer: compiled once (healthbench_web/compiled_query.py).
_own_item = CompiledQuery(
    lambda code, physician_id: (
        Assignment.objects.select_related("conversation", "response", "criterion")
        .exclude(status=Assignment.Status.CANCELLED)
        .filter(code=code, physician_id=physician_id, kind=Assignment.Kind.LABEL)[:2]
    ),
    *sentinels(1, uuid.UUID),
    *sentinels(1),
)

CONFLICT_NOTE = (
    "Withdrawn: this physician wrote the conversation or (was assigned) its rubric, and nobody labels responses "
    "against a rubric they wrote. Assign the item to another physician."
)
# Why a physician is passed over for an item, by the rule that excludes them.
WRITES_RUBRIC = "wrote or write its rubric and so may not label its responses"
VOTES_OPEN = (
    "still vote{s} on its consensus criteria, and the label page shows the criteria that others' votes attached"
)


class Label(TaskKind):
    value = Assignment.Kind.LABEL
    page = "label_item"
    by_task_code = True
    drafts = {"label-comment": 2000}
    missing = "You have no such labeling item"

    def own_task(self, physician: Physician, code) -> Assignment:
        """By the task's code, withdrawn ones included so the page can say why (`conflict`)."""
        return _own_item.get(as_uuid(code), physician.id)

    def conflict(self, task: Assignment) -> bool:
        """Withdrawn, or on a rubric its physician wrote: a physician never labels against their own rubric."""
        if task.status == Assignment.Status.WITHDRAWN:
            return True
        return rubric.writes(physician=task.physician, conversation=task.conversation)

    def items(self, conversation_ids: Sequence[int]) -> list[Item]:
        """Every (response, consensus criterion) pair of the conversations: the meta-eval items."""
        criteria: dict[int, list[int]] = defaultdict(list)
        for cid, pk in (
            Criterion.objects.filter(conversation_id__in=conversation_ids, level=Criterion.Level.CLUSTER)
            .order_by("conversation_id", "position", "id")
            .values_list("conversation_id", "id")
        ):
            criteria[cid].append(pk)
        items: list[Item] = []
        for cid, rid in model_responses(conversation_ids):
            items.extend((cid, rid, crit) for crit in criteria.get(cid, []))
        return items

    def excluded(self, conversation_ids: Sequence[int]) -> Excluded:
        """The rubric's writers, then those with an open vote task on the conversation."""
        found: Excluded = defaultdict(dict)
        for cid, pids in rubric.writers(conversation_ids).items():
            found[cid].update(dict.fromkeys(pids, WRITES_RUBRIC))
        votes = (
            Assignment.objects.filter(conversation_id__in=conversation_ids, kind=Assignment.Kind.CONSENSUS_VOTE)
            .exclude(status__in=Assignment.INACTIVE)
            .filter(status=Assignment.Status.OPEN)
        )
        for cid, pid in votes.values_list("conversation_id", "physician_id"):
            found[cid].setdefault(pid, VOTES_OPEN)
        return found

    def empty(self, conversation_ids: Sequence[int], items: Sequence[Item]) -> list[str]:
        with_items = {item[0] for item in items}
        missing = [cid for cid in conversation_ids if cid not in with_items]
        if not missing:
            return []
        responded = set(
            Response.objects.filter(conversation_id__in=missing)
            .exclude(source=Response.Source.PHYSICIAN)
            .values_list("conversation_id", flat=True)
        )
        names = dict(Conversation.objects.filter(id__in=missing).values_list("id", "prompt_id"))
        return [
            f"{names.get(cid, cid)}: "
            + ("no consensus criterion is attached yet" if cid in responded else "it has no model responses to label")
            for cid in missing
        ]

    def withdrawn_by(self, kind: str, pairs: Sequence[tuple[Item, int]]) -> int:
        """A new rubric writer's open labeling tasks on that conversation, each with CONFLICT_NOTE.

        A conditional update: a task done in the meantime keeps its label and stays done."""
        if kind != rubric.KIND.value or not pairs:
            return 0
        withdrawn = 0
        for (conversation_id, _, _), physician_id in pairs:
            withdrawn += Assignment.objects.filter(
                physician_id=physician_id,
                conversation_id=conversation_id,
                kind=self.value,
                status=Assignment.Status.OPEN,
            ).update(status=Assignment.Status.WITHDRAWN, note=CONFLICT_NOTE)
        return withdrawn

    def gold_pool(self) -> list[Item]:
        """A labeling task per gold labeling item."""
        rows = GoldItem.objects.filter(consensus_criterion__isnull=True).order_by("id")
        return [
            (cid, rid, crit) for cid, rid, crit in rows.values_list("conversation_id", "response_id", "criterion_id")
        ]


KIND = Label()
