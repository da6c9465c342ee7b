"""A physician's tasks: counts and progress by kind, and the way through labeling items."""

from dataclasses import dataclass, field

from django.db.models import Case, Count, F, Max, Min, Q, When, Window
from django.db.models.functions import RowNumber

from annotation.models import Assignment, Conversation, Physician
from annotation.task_kinds import KINDS, kind_of

# Open tasks listed per kind on the home page; the rest are reached one after another.
LISTED = 5


@dataclass(frozen=True)
class TaskLink:
    url: str
    prompt_id: str
    theme: str
    # The first words of the conversation's first user message: what the task is about.
    opening: str = ""


OPENING_WORDS = 12


def opening_words(messages: object, words: int = OPENING_WORDS) -> str:
    """The first words of the first user message ("" when there is none)."""
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == "user":
            parts = str(message.get("content", "")).split()
            return " ".join(parts[:words]) + (" …" if len(parts) > words else "")
    return ""


@dataclass
class KindSummary:
    kind: str
    label: str
    open: int = 0
    done: int = 0
    # Taken off the list after they were given out (the physician now writes the rubric).
    withdrawn: int = 0
    tasks: list[TaskLink] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.open + self.done

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0

    @property
    def next_task(self) -> TaskLink | None:
        return self.tasks[0] if self.tasks else None


def task_summary(physician: Physician) -> list[KindSummary]:
    """Each kind of task with its open and done counts and the first few open tasks, in one query.

    Window functions number the tasks and count them within each (kind, status); only the
    first LISTED of each group come back, each carrying its group's size. Plain values, not
    model instances; the messages are read for the listed open tasks only (a second query).
    """
    summary = {str(value): KindSummary(str(value), kind.label) for value, kind in KINDS.items()}
    group = [F("kind"), F("status")]
    rows = (
        Assignment.objects.filter(physician=physician)
        .exclude(status=Assignment.Status.CANCELLED)
        .annotate(
            rank=Window(RowNumber(), partition_by=group, order_by=F("id").asc()),
            in_group=Window(Count("id"), partition_by=group),
        )
        .filter(rank__lte=LISTED)
        .order_by("kind", "status", "id")
        .values_list(
            "kind", "status", "in_group", "code", "conversation__code", "conversation__prompt_id", "conversation__theme"
        )
    )
    found = list(rows)
    listed = {row[5] for row in found if row[1] == Assignment.Status.OPEN}
    messages = dict(Conversation.objects.filter(prompt_id__in=listed).values_list("prompt_id", "messages"))
    for kind, status, in_group, code, conversation_code, prompt_id, theme in found:
        entry = summary[kind]
        if status == Assignment.Status.OPEN:
            entry.open = in_group
            url = kind_of(kind).url(code=code, conversation_code=conversation_code)
            entry.tasks.append(TaskLink(url, prompt_id, theme, opening_words(messages.get(prompt_id))))
        elif status == Assignment.Status.WITHDRAWN:
            entry.withdrawn = in_group
        else:
            entry.done = in_group
    return list(summary.values())


@dataclass(frozen=True)
class LabelPosition:
    done: int
    total: int
    previous_code: str | None
    next_code: str | None


def _label_items(physician_id: int, kind: str):
    """The physician's tasks of a kind with one task per item (labeling), walked one after another."""
    return Assignment.objects.filter(physician_id=physician_id, kind=kind).exclude(status__in=Assignment.INACTIVE)


def following_label_code(task: Assignment) -> str | None:
    """The next open item after this one, wrapping round to the first open one, so a skipped item comes back."""
    code = (
        _label_items(task.physician_id, task.kind)
        .filter(status=Assignment.Status.OPEN)
        .exclude(id=task.id)
        # Items after this one first, then the ones before it; by id within each.
        .order_by(Case(When(id__gt=task.id, then=0), default=1), "id")
        .values_list("code", flat=True)
        .first()
    )
    return str(code) if code else None


def label_position(task: Assignment) -> LabelPosition:
    """Progress through the physician's labeling items, and the items just before and after this one (2 queries)."""
    is_open = Q(status=Assignment.Status.OPEN) & ~Q(id=task.id)
    found = _label_items(task.physician_id, task.kind).aggregate(
        total=Count("id"),
        done=Count("id", filter=Q(status=Assignment.Status.DONE)),
        previous=Max("id", filter=Q(id__lt=task.id)),
        following=Min("id", filter=is_open & Q(id__gt=task.id)),
        first_open=Min("id", filter=is_open),
    )
    following = found["following"] or found["first_open"]
    wanted = [i for i in (found["previous"], following) if i is not None]
    codes = dict(Assignment.objects.filter(id__in=wanted).values_list("id", "code")) if wanted else {}
    return LabelPosition(
        done=found["done"],
        total=found["total"],
        previous_code=str(codes[found["previous"]]) if found["previous"] else None,
        next_code=str(codes[following]) if following else None,
    )


def next_label_code(physician: Physician, kind: str) -> str | None:
    """The physician's first open task of `kind` (labeling), by its own code."""
    code = (
        Assignment.objects.filter(physician=physician, kind=kind, status=Assignment.Status.OPEN)
        .order_by("id")
        .values_list("code", flat=True)
        .first()
    )
    return str(code) if code else None


@dataclass(frozen=True)
class NextTask:
    url: str
    kind: str
    label: str
    prompt_id: str
    # True when it is of another kind than the task just finished.
    other_kind: bool


def next_task(physician: Physician, *, kind: str, after: Assignment | None = None) -> NextTask | None:
    """The physician's next open task: of the same kind first, then of any kind (1 query).

    `after` is the task just done or left, never offered again here.
    """
    tasks = Assignment.objects.filter(physician=physician, status=Assignment.Status.OPEN)
    if after is not None:
        tasks = tasks.exclude(id=after.id)
    found = (
        tasks.order_by(Case(When(kind=kind, then=0), default=1), "id")
        .values_list("kind", "code", "conversation__code", "conversation__prompt_id")
        .first()
    )
    if found is None:
        return None
    found_kind, code, conversation_code, prompt_id = found
    task_kind = kind_of(found_kind)
    url = task_kind.url(code=code, conversation_code=conversation_code)
    return NextTask(url, found_kind, task_kind.label, prompt_id, found_kind != kind)
