"""Giving out tasks: N physicians per item, spread evenly, least-loaded first."""

import heapq
import random
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.grading_seam import model_responses
from annotation.models import Assignment, Conversation, GoldAnswer, IdealResponse, Physician
from annotation.services.gold import gold_count, gold_mixed
from annotation.services.quality_refresh import quality_changed
from annotation.task_kinds import KINDS, kind_of
from annotation.task_kinds.base import Item

# Reference responses shown beside the ideal-response editor, as in the paper's Groups 2 and 3.
REFERENCES_PER_TASK = 4


@dataclass(frozen=True)
class AssignSummary:
    items: int
    created: int
    # Items that still have fewer than N physicians: too few eligible physicians were chosen.
    short: int
    # Per short conversation, why physicians were passed over ("p-1: physician and physician2 write its rubric").
    reasons: tuple[str, ...] = ()
    # Of those created, gold items given to physicians on trial.
    gold: int = 0
    # Open labeling tasks taken back because their physician now writes the rubric.
    withdrawn: int = 0

    def __str__(self) -> str:
        text = f"{counted(self.created, 'task')} created over {counted(self.items, 'item')}"
        if self.gold:
            text += f" (and {counted(self.gold, 'gold item')} for physicians on trial among them)"
        if self.short:
            text += f"; {counted(self.short, 'item')} could not get enough physicians"
            if not self.reasons:
                text += " (too few eligible physicians were chosen)"
        if self.withdrawn:
            text += (
                f"; {counted(self.withdrawn, 'open labeling task')} of the new rubric writers "
                f"{'was' if self.withdrawn == 1 else 'were'} withdrawn, because "
                "nobody labels responses against a rubric they wrote"
            )
        return text


def counted(n: int, noun: str) -> str:
    """ "1 task", "2 tasks": a count with its noun in the right number."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@dataclass(frozen=True)
class AssignPlan:
    """What an assignment would do, worked out without writing: the preview shows it, the commit applies it."""

    kind: str
    items: list[Item]
    pairs: list[tuple[Item, int]]
    short: int
    reasons: list[str]
    # Conversations that give no item at all for this kind, with why ("p-1: no model responses").
    empty: list[str]
    per_physician: list[tuple[str, int]]
    # Gold items mixed among the tasks of physicians on trial (annotation/services/gold.py).
    gold: list[tuple[Item, int]] = field(default_factory=list)

    @property
    def tasks(self) -> int:
        return len(self.pairs) + len(self.gold)


def assignment_complete(*, assignment: Assignment) -> None:
    """Mark a task done, once: a conditional update, so repeats and races change nothing.
    Every answer passes here, a changed one too: the physician quality figures count it."""
    quality_changed()
    now = timezone.now()
    updated = Assignment.objects.filter(id=assignment.id, status=Assignment.Status.OPEN).update(
        status=Assignment.Status.DONE, completed=now
    )
    if updated:
        assignment.status, assignment.completed = Assignment.Status.DONE, now


def open_load(physician_ids: Sequence[int]) -> dict[int, int]:
    """Open tasks per physician: what 'least loaded' means."""
    rows = (
        Assignment.objects.filter(physician_id__in=physician_ids, status=Assignment.Status.OPEN)
        .values("physician_id")
        .annotate(n=Count("id"))
    )
    load = dict.fromkeys(physician_ids, 0)
    load.update({row["physician_id"]: row["n"] for row in rows})
    return load


def _existing(kind: str, conversation_ids: Sequence[int]) -> dict[Item, set[int]]:
    assigned: dict[Item, set[int]] = defaultdict(set)
    rows = (
        Assignment.objects.filter(kind=kind, conversation_id__in=conversation_ids)
        .exclude(status__in=Assignment.INACTIVE)
        .values_list("conversation_id", "response_id", "criterion_id", "physician_id")
    )
    for cid, rid, crit, pid in rows:
        assigned[(cid, rid, crit)].add(pid)
    return assigned


def spread(
    items: Sequence[Item],
    *,
    physician_ids: Sequence[int],
    per_item: int,
    load: dict[int, int],
    assigned: dict[Item, set[int]],
    excluded: Mapping[int, Collection[int]],
    short_items: list[Item] | None = None,
) -> tuple[list[tuple[Item, int]], int]:
    """Choose physicians for each item, least loaded first (ties by id); returns (pairs, short items).

    Pure: `load` is the open-task count per physician and is not changed; the chosen pairs are.
    Items left short are appended to `short_items` when given, so the caller can say why.
    """
    heap = [(load.get(pid, 0), pid) for pid in physician_ids]
    heapq.heapify(heap)
    pairs: list[tuple[Item, int]] = []
    short = 0
    for item in items:
        have = assigned.get(item, set())
        need = per_item - len(have)
        passed, chosen = [], []
        while need > 0 and heap:
            entry = heapq.heappop(heap)
            pid = entry[1]
            if pid in have or pid in excluded.get(item[0], ()):
                passed.append(entry)
                continue
            chosen.append(entry)
            pairs.append((item, pid))
            need -= 1
        for entry in passed:
            heapq.heappush(heap, entry)
        for count, pid in chosen:
            heapq.heappush(heap, (count + 1, pid))
        if need > 0:
            short += 1
            if short_items is not None:
                short_items.append(item)
    return pairs, short


def skip_reasons(
    short_items: Sequence[Item],
    *,
    physician_ids: Sequence[int],
    per_item: int,
    assigned: dict[Item, set[int]],
    excluded: dict[int, dict[int, str]],
    chosen: Sequence[tuple[Item, int]],
) -> list[str]:
    """One sentence per conversation with short items: who was passed over, and why."""
    names = dict(Physician.objects.filter(id__in=physician_ids).values_list("id", "user__username"))
    prompt_ids = dict(
        Conversation.objects.filter(id__in={item[0] for item in short_items}).values_list("id", "prompt_id")
    )
    got: dict[Item, int] = defaultdict(int)
    for item, _ in chosen:
        got[item] += 1
    by_conversation: dict[int, list[Item]] = defaultdict(list)
    for item in short_items:
        by_conversation[item[0]].append(item)
    reasons = []
    for cid, items in by_conversation.items():
        have = min(len(assigned.get(item, ())) + got[item] for item in items)
        why: dict[str, list[str]] = defaultdict(list)
        for pid, reason in excluded.get(cid, {}).items():
            if pid in names:
                why[reason].append(names[pid])
        label = f"{prompt_ids.get(cid, cid)}" + (f" ({counted(len(items), 'item')})" if items[0][1] is not None else "")
        text = f"{label}: has {have} of {per_item} physicians"
        for reason, who in why.items():
            who.sort()
            verb = reason.format(s="" if len(who) > 1 else "s")
            text += f"; skipped {_and(who)}, who {verb}"
        passed = sum(len(who) for who in why.values())
        eligible = len(physician_ids) - passed
        text += f"; {eligible} other eligible physician{'s' if eligible != 1 else ''} in the selection"
        reasons.append(text)
    return reasons


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def label_task_withdraw(*, task: Assignment, note: str) -> bool:
    """Withdraw one open labeling task; False when it was no longer open (done or withdrawn already)."""
    updated = Assignment.objects.filter(id=task.id, status=Assignment.Status.OPEN).update(
        status=Assignment.Status.WITHDRAWN, note=note
    )
    if updated:
        task.status, task.note = Assignment.Status.WITHDRAWN, note
    return bool(updated)


def _references(conversation_ids: Sequence[int]) -> dict[int, list[int]]:
    refs: dict[int, list[int]] = defaultdict(list)
    for cid, rid in model_responses(conversation_ids):
        if len(refs[cid]) < REFERENCES_PER_TASK:
            refs[cid].append(rid)
    return refs


def assignments_plan(
    *, kind: str, conversation_ids: Sequence[int], physicians: Sequence[Physician], per_item: int
) -> AssignPlan:
    """What assigning would create, and what it could not: read-only, for the preview and the commit alike."""
    working = (Physician.Status.TRIAL, Physician.Status.ACTIVE)
    # External physicians (no account) cannot log in: they never receive tasks.
    chosen = [
        p for p in physicians if p.role == Physician.Role.PHYSICIAN and p.status in working and p.user_id is not None
    ]
    physician_ids = [p.id for p in chosen]
    task_kind = kind_of(kind)
    items = task_kind.items(conversation_ids)
    excluded = task_kind.excluded(conversation_ids)
    assigned = _existing(kind, conversation_ids)
    short_items: list[Item] = []
    pairs, short = spread(
        items,
        physician_ids=physician_ids,
        per_item=per_item,
        load=open_load(physician_ids),
        assigned=assigned,
        excluded=excluded,
        short_items=short_items,
    )
    reasons = skip_reasons(
        short_items, physician_ids=physician_ids, per_item=per_item, assigned=assigned, excluded=excluded, chosen=pairs
    )
    gold = gold_pairs(kind, chosen, pairs)
    per: dict[int, int] = defaultdict(int)
    for _, pid in [*pairs, *gold]:
        per[pid] += 1
    names = {p.id: str(p) for p in chosen}
    return AssignPlan(
        kind=kind,
        items=list(items),
        pairs=pairs,
        short=short,
        reasons=reasons,
        empty=task_kind.empty(conversation_ids, items),
        per_physician=[(names[pid], per[pid]) for pid in physician_ids if per[pid]],
        gold=gold,
    )


def gold_pairs(kind: str, physicians: Sequence[Physician], pairs: Sequence[tuple[Item, int]]) -> list[tuple[Item, int]]:
    """Gold items for the physicians on trial among `physicians`, GOLD_SHARE_FOR_TRIAL of what
    they receive in all, by the rules ordinary items follow: never one they hold or answered
    already, nor on a conversation whose rubric they write, nor one that would unblind them."""
    given = Counter(pid for _, pid in pairs)
    trial = [p.id for p in physicians if p.status == Physician.Status.TRIAL and given[p.id]]
    share = settings.GOLD_SHARE_FOR_TRIAL
    task_kind = kind_of(kind)
    pool = task_kind.gold_pool() if trial and share > 0 else []
    if not pool:
        return []
    conversation_ids = sorted({item[0] for item in pool})
    excluded: dict[int, set[int]] = defaultdict(set)
    for cid, found in task_kind.excluded(conversation_ids).items():
        excluded[cid] |= set(found)
    # Held in any status: the unique constraints count cancelled and withdrawn tasks too.
    held: set[tuple[Item, int]] = set(pairs)
    for cid, rid, crit, pid in Assignment.objects.filter(
        kind=kind, conversation_id__in=conversation_ids, physician_id__in=trial
    ).values_list("conversation_id", "response_id", "criterion_id", "physician_id"):
        held.add(((cid, rid, crit), pid))
    answered = set(
        GoldAnswer.objects.filter(physician_id__in=trial).values_list(
            "physician_id", "gold__conversation_id", "gold__response_id", "gold__criterion_id"
        )
    )
    chosen: list[tuple[Item, int]] = []
    for pid in trial:
        want = gold_count(given[pid], share)
        for item in pool:
            if want == 0:
                break
            if (item, pid) in held or pid in excluded[item[0]] or (pid, *item) in answered:
                continue
            chosen.append((item, pid))
            want -= 1
    return chosen


def assignments_create(
    *,
    kind: str,
    conversation_ids: Sequence[int],
    physicians: Sequence[Physician],
    per_item: int,
    assigned_by: Physician | None,
    condition: str = "",
) -> AssignSummary:
    """Give each item (a conversation, or a response x consensus criterion for labeling) N physicians.

    Items that already have physicians keep them and only get the missing ones, so running the
    same request twice creates nothing the second time.
    """
    with transaction.atomic():
        plan = assignments_plan(kind=kind, conversation_ids=conversation_ids, physicians=physicians, per_item=per_item)
        pairs = plan.pairs
        condition = kind_of(kind).condition(condition)
        # Gold at random places among each trial physician's new tasks: the queue's order hides it.
        pairs = gold_mixed(pairs, plan.gold, random.SystemRandom())
        created = Assignment.objects.bulk_create(
            [
                Assignment(
                    physician_id=pid,
                    kind=kind,
                    conversation_id=cid,
                    response_id=rid,
                    criterion_id=crit,
                    condition=condition,
                    assigned_by=assigned_by,
                )
                for (cid, rid, crit), pid in pairs
            ],
            batch_size=1000,
        )
        if condition == IdealResponse.Condition.WITH_REFERENCE:
            refs = _references(conversation_ids)
            through = Assignment.reference_responses.through
            through.objects.bulk_create(
                [
                    through(assignment_id=task.id, response_id=rid)
                    for task in created
                    for rid in refs.get(task.conversation_id, [])
                ]
            )
        # Tasks given out earlier that these make impossible (a rubric writer's labeling tasks
        # on that conversation) leave their physician's list with a note instead.
        withdrawn = sum(other.withdrawn_by(kind, pairs) for other in KINDS.values())
    return AssignSummary(
        items=len(plan.items),
        created=len(created),
        gold=len(plan.gold),
        short=plan.short,
        reasons=tuple(plan.empty + plan.reasons),
        withdrawn=withdrawn,
    )


def assignments_cancel_open(*, physician: Physician) -> int:
    """Take back a physician's open tasks (kept for audit, no longer counted)."""
    return Assignment.objects.filter(physician=physician, status=Assignment.Status.OPEN).update(
        status=Assignment.Status.CANCELLED
    )


def least_loaded_physician(*, exclude: Sequence[int] = ()) -> Physician | None:
    """The active physician with an account with the fewest open tasks (ties: the earliest), or None."""
    return (
        Physician.objects.filter(role=Physician.Role.PHYSICIAN, status=Physician.Status.ACTIVE, user__isnull=False)
        .exclude(id__in=exclude)
        .annotate(open_tasks=Count("assignments", filter=Q(assignments__status=Assignment.Status.OPEN)))
        .order_by("open_tasks", "id")
        .first()
    )
