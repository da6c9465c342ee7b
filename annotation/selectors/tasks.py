"""A physician's tasks: counts and progress by kind, and the way through labeling items."""

from dataclasses import dataclass, field

from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber

from annotation.models import Assignment, Conversation, Physician

# Open tasks listed per kind on the home page; the rest are reached one after another.
LISTED = 5
TASK_FIELDS = ("id", "code", "kind", "status", "conversation__code", "conversation__prompt_id", "conversation__theme")


@dataclass
class KindSummary:
    kind: str
    label: str
    open: int = 0
    done: int = 0
    tasks: list[Assignment] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.open + self.done

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0

    @property
    def next_task(self) -> Assignment | None:
        return self.tasks[0] if self.tasks else None


def task_summary(physician: Physician) -> list[KindSummary]:
    """Each kind of task with its open and done counts and the first few open tasks (2 queries)."""
    summary = {kind: KindSummary(kind, label) for kind, label in Assignment.Kind.choices}
    counts = (
        Assignment.objects.filter(physician=physician)
        .exclude(status=Assignment.Status.CANCELLED)
        .values("kind")
        .annotate(open=Count("id", filter=Q(status=Assignment.Status.OPEN)), done=Count("id", filter=Q(status=Assignment.Status.DONE)))
    )
    for row in counts:
        summary[row["kind"]].open, summary[row["kind"]].done = row["open"], row["done"]
    # The first LISTED open tasks of every kind in one query; the conversation's messages stay unread.
    first_open = (
        Assignment.objects.filter(physician=physician, status=Assignment.Status.OPEN)
        .select_related("conversation")
        .only(*TASK_FIELDS)
        .annotate(rank=Window(RowNumber(), partition_by=[F("kind")], order_by=F("id").asc()))
        .filter(rank__lte=LISTED)
        .order_by("kind", "id")
    )
    for task in first_open:
        summary[task.kind].tasks.append(task)
    return [s for s in summary.values()]


def wrote_rubric(*, physician: Physician, conversation: Conversation) -> bool:
    """Whether the physician wrote the conversation, one of its criteria, or holds its rubric task."""
    if conversation.author_id == physician.id:
        return True
    return (
        Conversation.objects.filter(id=conversation.id)
        .filter(Q(criteria__author=physician) | Q(assignments__physician=physician, assignments__kind=Assignment.Kind.RUBRIC))
        .exists()
    )


@dataclass(frozen=True)
class LabelPosition:
    done: int
    total: int
    previous_code: str | None
    next_code: str | None


def _label_items(physician_id: int):
    return Assignment.objects.filter(physician_id=physician_id, kind=Assignment.Kind.LABEL).exclude(
        status=Assignment.Status.CANCELLED
    )


def following_label_code(task: Assignment) -> str | None:
    """The next open item after this one, wrapping round to the first open one, so a skipped item comes back."""
    open_items = _label_items(task.physician_id).filter(status=Assignment.Status.OPEN).exclude(id=task.id)
    following = open_items.filter(id__gt=task.id).order_by("id").values_list("code", flat=True).first()
    if following is None:
        following = open_items.order_by("id").values_list("code", flat=True).first()
    return str(following) if following else None


def label_position(task: Assignment) -> LabelPosition:
    """Progress through the physician's labeling items, and the items just before and after this one."""
    mine = _label_items(task.physician_id)
    counts = mine.aggregate(total=Count("id"), done=Count("id", filter=Q(status=Assignment.Status.DONE)))
    previous = mine.filter(id__lt=task.id).order_by("-id").values_list("code", flat=True).first()
    return LabelPosition(
        done=counts["done"],
        total=counts["total"],
        previous_code=str(previous) if previous else None,
        next_code=following_label_code(task),
    )


def next_label_code(physician: Physician) -> str | None:
    code = (
        Assignment.objects.filter(physician=physician, kind=Assignment.Kind.LABEL, status=Assignment.Status.OPEN)
        .order_by("id")
        .values_list("code", flat=True)
        .first()
    )
    return str(code) if code else None
