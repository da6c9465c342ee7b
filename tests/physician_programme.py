"""A planted programme for the physician quality tests and bench: physicians labelling shared
items, each with server-recorded page-open and answer events, three of them planted apart
(one labels with a 35% error rate, one takes twice as long, one answers "can't judge" on 20%)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from django.contrib.auth.models import User

from annotation.models import (
    Assignment,
    CantJudge,
    Conversation,
    Criterion,
    Physician,
    PhysicianLabel,
    TaskEvent,
)
from grading.models import Response

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
CRITERIA_PER_CONVERSATION = 10
RESPONSES_PER_CONVERSATION = 10
LABELS_PER_ITEM = 4


@dataclass
class Planted:
    physicians: list[Physician]
    sloppy: Physician
    slow: Physician
    unsure: Physician


def planted_programme(*, n_physicians: int = 30, n_labels: int = 20_000, seed: int = 7) -> Planted:
    rng = np.random.default_rng(seed)
    users = User.objects.bulk_create([User(username=f"doc{i:03d}") for i in range(n_physicians)])
    physicians = Physician.objects.bulk_create([Physician(user=u) for u in users])
    sloppy, slow, unsure = physicians[0], physicians[1], physicians[2]
    items = _items(-(-n_labels // LABELS_PER_ITEM))
    truth = rng.random(len(items)) < 0.6
    error = np.full(n_physicians, 0.05)
    error[0] = 0.35
    median_seconds = np.full(n_physicians, 30.0)
    median_seconds[1] = 60.0
    unsure_rate = np.full(n_physicians, 0.01)
    unsure_rate[2] = 0.20
    tasks, labels, unsure_rows, timings = [], [], [], []
    made = 0
    for index, (conversation_id, response_id, criterion_id) in enumerate(items):
        for p in rng.choice(n_physicians, size=LABELS_PER_ITEM, replace=False).tolist():
            if made == n_labels:
                break
            made += 1
            opened = START + timedelta(seconds=float(rng.uniform(0, 28 * 86400)))
            took = float(rng.lognormal(np.log(median_seconds[p]), 0.4))
            done = opened + timedelta(seconds=took)
            item = {"physician_id": physicians[p].pk, "response_id": response_id, "criterion_id": criterion_id}
            tasks.append(
                Assignment(
                    **item,
                    kind=Assignment.Kind.LABEL,
                    conversation_id=conversation_id,
                    status=Assignment.Status.DONE,
                    completed=done,
                )
            )
            timings.append((opened, done))
            if rng.random() < unsure_rate[p]:
                unsure_rows.append(
                    CantJudge(**item, conversation_id=conversation_id, reason=CantJudge.Reason.EXPERTISE)
                )
            else:
                labels.append(PhysicianLabel(**item, met=bool(truth[index] ^ (rng.random() < error[p]))))
    tasks = Assignment.objects.bulk_create(tasks, batch_size=2000)
    PhysicianLabel.objects.bulk_create(labels, batch_size=2000)
    CantJudge.objects.bulk_create(unsure_rows, batch_size=2000)
    events = []
    for task, (opened, done) in zip(tasks, timings, strict=True):
        events.append(TaskEvent(assignment_id=task.pk, kind=TaskEvent.Kind.OPEN, at=opened))
        events.append(TaskEvent(assignment_id=task.pk, kind=TaskEvent.Kind.ANSWER, at=done))
    TaskEvent.objects.bulk_create(events, batch_size=4000)
    return Planted(physicians, sloppy, slow, unsure)


def _items(n_items: int) -> list[tuple[int, int, int]]:
    per_conversation = CRITERIA_PER_CONVERSATION * RESPONSES_PER_CONVERSATION
    n_conversations = -(-n_items // per_conversation)
    conversations = Conversation.objects.bulk_create(
        [
            Conversation(prompt_id=f"planted-{i:05d}", messages=[{"role": "user", "content": "Is this safe?"}])
            for i in range(n_conversations)
        ]
    )
    criteria = Criterion.objects.bulk_create(
        [
            Criterion(conversation=c, position=k, text=f"Criterion {k}.", points=5)
            for c in conversations
            for k in range(CRITERIA_PER_CONVERSATION)
        ],
        batch_size=2000,
    )
    responses = Response.objects.bulk_create(
        [
            Response(conversation=c, text=f"Answer {k}.")
            for c in conversations
            for k in range(RESPONSES_PER_CONVERSATION)
        ],
        batch_size=2000,
    )
    items: list[tuple[int, int, int]] = []
    for c_index, conversation in enumerate(conversations):
        crit = criteria[c_index * CRITERIA_PER_CONVERSATION : (c_index + 1) * CRITERIA_PER_CONVERSATION]
        resp = responses[c_index * RESPONSES_PER_CONVERSATION : (c_index + 1) * RESPONSES_PER_CONVERSATION]
        items.extend((conversation.pk, r.pk, k.pk) for r in resp for k in crit)
    return items[:n_items]


def new_label_task(who: Physician) -> Assignment:
    """An open labeling task for `who` on an item other physicians labelled and they did not."""
    mine = set(PhysicianLabel.objects.filter(physician=who).values_list("response_id", "criterion_id"))
    for label in PhysicianLabel.objects.exclude(physician=who).select_related("response").order_by("id"):
        if (label.response_id, label.criterion_id) not in mine:
            return Assignment.objects.create(
                physician=who,
                kind=Assignment.Kind.LABEL,
                conversation_id=label.response.conversation_id,
                response_id=label.response_id,
                criterion_id=label.criterion_id,
            )
    raise AssertionError("no item left to label")
