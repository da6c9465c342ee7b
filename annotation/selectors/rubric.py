"""The rubric editor's view of a conversation: criteria, warnings and the running total."""

from dataclasses import dataclass

from django.db.models import Q, QuerySet

from annotation.models import Conversation, Criterion, Physician
from annotation.rubric_checks import DuplicatePair, near_duplicates, positive_total, sign_warning


def editor_criteria(*, conversation: Conversation, physician: Physician) -> QuerySet[Criterion]:
    """The rubric a physician works on: their own criteria and the dataset's example criteria.

    Other physicians' criteria and the consensus criteria attached by votes stay out of
    sight, so that what one physician writes or votes does not steer another.
    """
    return Criterion.objects.filter(conversation=conversation, level=Criterion.Level.EXAMPLE).filter(
        Q(author=physician) | Q(author__isnull=True, origin__isnull=True)
    )


@dataclass(frozen=True)
class DuplicateWarning:
    first: Criterion
    second: Criterion
    similarity: float
    contrast: tuple[str, str] | None = None

    @property
    def percent(self) -> int:
        return round(100 * self.similarity)


@dataclass(frozen=True)
class RubricView:
    criteria: list[Criterion]
    positive_total: int
    duplicates: list[DuplicateWarning]

    @property
    def sign_warnings(self) -> int:
        return sum(1 for c in self.criteria if c.sign_warning)

    @property
    def own_count(self) -> int:
        return sum(1 for c in self.criteria if c.editable)


def annotate_criterion(criterion: Criterion, physician: Physician) -> Criterion:
    """Attach what the editor shows beside one criterion (its sign warning, whether it is editable)."""
    criterion.sign_warning = sign_warning(criterion.text, criterion.points)
    criterion.editable = criterion.author_id == physician.id
    return criterion


def rubric_view(*, conversation: Conversation, physician: Physician) -> RubricView:
    criteria = [
        annotate_criterion(c, physician)
        for c in editor_criteria(conversation=conversation, physician=physician)
        .only("id", "conversation_id", "position", "text", "points", "axis", "author_id", "created")
        .order_by("position", "id")
    ]
    numbers = {c.id: n for n, c in enumerate(criteria, start=1)}
    by_id = {c.id: c for c in criteria}
    pairs: list[DuplicatePair] = near_duplicates((c.id, c.text) for c in criteria)
    for c in criteria:
        c.number = numbers[c.id]
    return RubricView(
        criteria=criteria,
        positive_total=positive_total(c.points for c in criteria),
        duplicates=[DuplicateWarning(by_id[p.first], by_id[p.second], p.similarity, p.contrast) for p in pairs],
    )
