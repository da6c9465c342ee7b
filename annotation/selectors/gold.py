"""Gold items as the pages read them: what a physician may see once they have answered, and each
physician's gold accuracy (the pool given to physicians on trial is each task kind's
`gold_pool`, annotation/task_kinds/)."""

from dataclasses import dataclass
from typing import cast

from django.conf import settings
from django.db.models import Count, F, Q

from annotation.models import Assignment, GoldAnswer, GoldItem


@dataclass(frozen=True)
class GoldFeedback:
    """Shown to a physician after they answered a gold item: the known answer and why."""

    answer_text: str
    rationale: str
    # The physician's first answer, the one their gold accuracy counts.
    correct: bool


def label_feedback(task: Assignment) -> GoldFeedback | None:
    """For a labeling task its physician has answered: the gold answer, else None (1 query).

    Only after an answer of theirs is recorded (GoldAnswer): before it, nothing is read."""
    if task.response_id is None or task.criterion_id is None:
        return None
    row = (
        GoldAnswer.objects.filter(
            physician_id=task.physician_id,
            gold__response_id=task.response_id,
            gold__criterion_id=task.criterion_id,
            gold__consensus_criterion__isnull=True,
        )
        .select_related("gold")
        .first()
    )
    return None if row is None else _feedback(row)


def _feedback(row: GoldAnswer) -> GoldFeedback:
    return GoldFeedback(row.gold.answer_text, row.gold.rationale, row.answer == row.gold.answer)


def ballot_feedback(*, physician_id: int, conversation_id: int) -> dict[int, GoldFeedback]:
    """Per consensus criterion id of a ballot: the gold answer of items this physician has
    answered (1 query)."""
    rows = GoldAnswer.objects.filter(
        physician_id=physician_id, gold__conversation_id=conversation_id, gold__consensus_criterion__isnull=False
    ).select_related("gold")
    return {cast(int, row.gold.consensus_criterion_id): _feedback(row) for row in rows}


@dataclass(frozen=True)
class GoldTally:
    """A physician's answered gold items and how many matched the known answer."""

    answered: int
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.answered if self.answered else None

    @property
    def suggests_promotion(self) -> bool:
        """GOLD_PROMOTION_ACCURACY reached over at least GOLD_MIN_ITEMS answers: a suggestion
        to the curator, never acted on by itself."""
        enough = self.answered >= settings.GOLD_MIN_ITEMS
        return enough and self.correct >= settings.GOLD_PROMOTION_ACCURACY * self.answered


def gold_tallies(physician_ids) -> dict[int, GoldTally]:
    """Per physician with at least one answered gold item: answered and correct (1 query, none
    for no physicians)."""
    ids = list(physician_ids)
    if not ids:
        return {}
    rows = (
        GoldAnswer.objects.filter(physician_id__in=ids)
        .values("physician_id")
        .annotate(answered=Count("id"), correct=Count("id", filter=Q(answer=F("gold__answer"))))
    )
    return {row["physician_id"]: GoldTally(row["answered"], row["correct"]) for row in rows}


def gold_items_listed(limit: int = 500):
    """The curator's list: gold items, newest first, with how many physicians answered them
    and how many of those were right."""
    return (
        GoldItem.objects.select_related("conversation", "response", "criterion", "consensus_criterion")
        .annotate(answered=Count("answers"), correct=Count("answers", filter=Q(answers__answer=F("answer"))))
        .order_by("-id")[:limit]
    )


def gold_item_answers(gold: GoldItem) -> GoldTally:
    """The physicians' first answers on one gold item, and how many match its known answer (1 query)."""
    row = GoldAnswer.objects.filter(gold=gold).aggregate(
        answered=Count("id"), correct=Count("id", filter=Q(answer=gold.answer))
    )
    return GoldTally(row["answered"], row["correct"])
