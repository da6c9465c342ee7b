"""The rubric editor's view of a conversation: criteria, warnings and the running total."""

from dataclasses import dataclass

from django.db.models import Q, QuerySet

from annotation.models import Conversation, Criterion, Physician
from annotation.rubric_checks import DuplicatePair, SignWarning, near_duplicates, positive_total, sign_warning
from healthbench_web.compiled_query import CompiledQuery, sentinels


def editor_criteria(*, conversation: Conversation, physician: Physician) -> QuerySet[Criterion]:
    """The rubric a physician works on: their own criteria and the dataset's example criteria.

    Other physicians' criteria and the consensus criteria attached by votes stay out of
    sight, so that what one physician writes or votes does not steer another.
    """
    return Criterion.objects.filter(conversation=conversation, level=Criterion.Level.EXAMPLE).filter(
        Q(author=physician) | Q(author__isnull=True, origin__isnull=True)
    )


@dataclass(frozen=True)
class CriterionRow:
    """One criterion as the editor shows it: its text and points, its number in the list, whether
    the physician may edit it, and what its wording says against its sign."""

    id: int
    text: str
    points: int
    axis_label: str
    editable: bool
    sign_warning: SignWarning | None
    number: int | None = None  # None when shown alone, outside the numbered list


@dataclass(frozen=True)
class DuplicateWarning:
    first: CriterionRow
    second: CriterionRow
    similarity: float
    contrast: tuple[str, str] | None = None

    @property
    def percent(self) -> int:
        return round(100 * self.similarity)


@dataclass(frozen=True)
class RubricView:
    criteria: list[CriterionRow]
    positive_total: int
    duplicates: list[DuplicateWarning]

    @property
    def sign_warnings(self) -> int:
        return sum(1 for c in self.criteria if c.sign_warning)

    @property
    def own_count(self) -> int:
        return sum(1 for c in self.criteria if c.editable)


def editor_row(criterion: Criterion, physician: Physician, number: int | None = None) -> CriterionRow:
    """What the editor shows beside one criterion (its sign warning, whether it is editable)."""
    return CriterionRow(
        id=criterion.id,
        text=criterion.text,
        points=criterion.points,
        axis_label=criterion.get_axis_display(),
        editable=criterion.author_id == physician.id,
        sign_warning=sign_warning(criterion.text, criterion.points),
        number=number,
    )


def _editor_rows_query(conversation_id: int, physician_id: int) -> QuerySet[Criterion]:
    return (
        Criterion.objects.filter(conversation_id=conversation_id, level=Criterion.Level.EXAMPLE)
        .filter(Q(author_id=physician_id) | Q(author__isnull=True, origin__isnull=True))
        .only("id", "conversation_id", "position", "text", "points", "axis", "author_id", "created")
        .order_by("position", "id")
    )


# editor_criteria as the editor lists them, on every page and edit: compiled once
# (healthbench_web/compiled_query.py).
_editor_rows = CompiledQuery(_editor_rows_query, *sentinels(2))


def rubric_view(*, conversation: Conversation, physician: Physician) -> RubricView:
    criteria = [
        editor_row(c, physician, number)
        for number, c in enumerate(_editor_rows.all(conversation.id, physician.id), start=1)
    ]
    by_id = {c.id: c for c in criteria}
    pairs: list[DuplicatePair] = near_duplicates((c.id, c.text) for c in criteria)
    return RubricView(
        criteria=criteria,
        positive_total=positive_total(c.points for c in criteria),
        duplicates=[DuplicateWarning(by_id[p.first], by_id[p.second], p.similarity, p.contrast) for p in pairs],
    )
