"""Gold items: a curator's known answers, mixed among the tasks of physicians on trial.

* How many: ``gold_count`` gives a physician n ordinary tasks' worth of gold so that gold
  makes up ``GOLD_SHARE_FOR_TRIAL`` of what they receive; ``gold_mixed`` puts them at random
  places among the physician's new tasks, so their position in the queue says nothing.
* Answering: ``gold_answer_label`` / ``gold_answer_vote`` keep a physician's first answer on a
  gold item (GoldAnswer), called in the same transaction as the label or vote. Labels and
  votes may be changed later, after the known answer was shown: accuracy counts the first.
* Removing: ``gold_item_remove`` takes the mark off an item and the first answers with it.
"""

import math
import random
from collections import defaultdict
from collections.abc import Sequence

from django.db import IntegrityError, transaction

from annotation.models import GoldAnswer, GoldItem, Physician

Pair = tuple[tuple[int, int | None, int | None], int]  # ((conversation, response, criterion), physician id)


def gold_count(ordinary: int, share: float) -> int:
    """Gold tasks to add to `ordinary` tasks so that gold is `share` of the whole, rounded half up."""
    if ordinary <= 0 or share <= 0:
        return 0
    return math.floor(ordinary * share / (1 - share) + 0.5)


def gold_mixed(pairs: Sequence[Pair], gold: Sequence[Pair], rng: random.Random) -> list[Pair]:
    """`pairs` in their order with each physician's gold tasks put after a random one of their
    ordinary tasks (tasks are done in the order they are created)."""
    golds: dict[int, list[Pair]] = defaultdict(list)
    for pair in gold:
        golds[pair[1]].append(pair)
    ordinary: dict[int, int] = defaultdict(int)
    for _, pid in pairs:
        ordinary[pid] += 1
    # Per physician, after which of their ordinary tasks (1-based) each gold task comes.
    after = {pid: sorted(rng.randint(1, max(1, ordinary[pid])) for _ in found) for pid, found in golds.items()}
    seen: dict[int, int] = defaultdict(int)
    out: list[Pair] = []
    for pair in pairs:
        out.append(pair)
        pid = pair[1]
        seen[pid] += 1
        while after.get(pid) and after[pid][0] == seen[pid]:
            after[pid].pop(0)
            out.append(golds[pid].pop(0))
    # Physicians with no ordinary task in `pairs` (never the case from the plan) keep theirs at the end.
    out.extend(pair for found in golds.values() for pair in found)
    return out


def _keep_first(*, gold_id: int, physician: int, answer: bool) -> None:
    try:
        with transaction.atomic():
            GoldAnswer.objects.get_or_create(gold_id=gold_id, physician_id=physician, defaults={"answer": answer})
    except IntegrityError:
        pass  # the same physician's other tab answered first: that answer was the first


def gold_answer_label(*, physician_id: int, response_id: int, criterion_id: int, met: bool) -> None:
    gold_id = (
        GoldItem.objects.filter(response_id=response_id, criterion_id=criterion_id, consensus_criterion__isnull=True)
        .values_list("id", flat=True)
        .first()
    )
    if gold_id is not None:
        _keep_first(gold_id=gold_id, physician=physician_id, answer=met)


def gold_answer_vote(*, physician: Physician, conversation_id: int, consensus_criterion_id: int, applies: bool) -> None:
    gold_id = (
        GoldItem.objects.filter(conversation_id=conversation_id, consensus_criterion_id=consensus_criterion_id)
        .values_list("id", flat=True)
        .first()
    )
    if gold_id is not None:
        _keep_first(gold_id=gold_id, physician=physician.id, answer=applies)


def gold_item_remove(gold: GoldItem) -> int:
    """Takes the gold mark off an item: its known answer and the physicians' first answers on it
    go (so it leaves their gold accuracy); their labels or votes and their tasks stay, as
    ordinary work. Returns how many first answers went."""
    with transaction.atomic():
        answers, _ = GoldAnswer.objects.filter(gold=gold).delete()
        gold.delete()
    return answers
