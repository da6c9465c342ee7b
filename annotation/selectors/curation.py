"""Curator pages: choosing conversations and physicians to assign, progress, vetting lists."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from annotation.models import Assignment, Conversation, Physician, Subset

# One assignment request covers at most this many conversations: bounded work per request,
# and below SQLite's limit on query parameters.
MAX_CONVERSATIONS = 500


class ConversationStatus:
    ANY = ""
    UNASSIGNED = "unassigned"
    OPEN = "open"
    DONE = "done"
    choices = [
        (ANY, "Any status"),
        (UNASSIGNED, "Not yet assigned for this task"),
        (OPEN, "Assigned, not finished"),
        (DONE, "Assigned and finished"),
    ]


def conversations_to_assign(
    *, kind: str, theme: str = "", subset: str = "", status: str = ""
) -> QuerySet[Conversation]:
    """Conversations matching the curator's filters, oldest first; `status` is about tasks of `kind`."""
    conversations = Conversation.objects.order_by("id")
    if theme:
        conversations = conversations.filter(theme=theme)
    if subset:
        conversations = conversations.filter(memberships__subset__name=subset)
    tasks = Assignment.objects.filter(conversation=OuterRef("pk"), kind=kind).exclude(status__in=Assignment.INACTIVE)
    if status == ConversationStatus.UNASSIGNED:
        conversations = conversations.filter(~Exists(tasks))
    elif status == ConversationStatus.OPEN:
        conversations = conversations.filter(Exists(tasks.filter(status=Assignment.Status.OPEN)))
    elif status == ConversationStatus.DONE:
        conversations = conversations.filter(Exists(tasks), ~Exists(tasks.filter(status=Assignment.Status.OPEN)))
    return conversations


def physicians_to_assign(*, specialty: str = "", language: str = "", statuses: tuple[str, ...] = ()) -> list[Physician]:
    """Physicians who can take tasks (they can log in), filtered by specialty and a language they speak."""
    statuses = statuses or (Physician.Status.TRIAL, Physician.Status.ACTIVE)
    physicians = Physician.objects.filter(
        role=Physician.Role.PHYSICIAN, status__in=statuses, user__isnull=False
    ).select_related("user")
    if specialty:
        physicians = physicians.filter(specialty=specialty)
    # JSON containment is not portable to SQLite; a few hundred physicians filter fast in Python.
    return [p for p in physicians.order_by("id") if not language or language in (p.languages or [])]


def external_physicians_left_out(*, statuses: tuple[str, ...] = ()) -> int:
    """External physicians (from an imported file, no account) the same status filter would have chosen."""
    statuses = statuses or (Physician.Status.TRIAL, Physician.Status.ACTIVE)
    return Physician.objects.filter(role=Physician.Role.PHYSICIAN, status__in=statuses, user__isnull=True).count()


def external_physicians() -> QuerySet[Physician]:
    """Physicians known only from an imported file, with how many labels each gave."""
    return (
        Physician.objects.filter(role=Physician.Role.PHYSICIAN, user__isnull=True)
        .annotate(n_labels=Count("labels"))
        .order_by("anonymized_id")
    )


def specialties() -> list[str]:
    return list(
        Physician.objects.filter(role=Physician.Role.PHYSICIAN)
        .exclude(specialty="")
        .values_list("specialty", flat=True)
        .distinct()
        .order_by("specialty")
    )


def languages() -> list[str]:
    found: set[str] = set()
    for values in Physician.objects.filter(role=Physician.Role.PHYSICIAN).values_list("languages", flat=True):
        found.update(v for v in values or [] if isinstance(v, str))
    return sorted(found)


def subset_names() -> list[str]:
    return list(Subset.objects.order_by("name").values_list("name", flat=True))


@dataclass
class ProgressRow:
    physician: Physician
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (done, total)

    @property
    def done(self) -> int:
        return sum(d for d, _ in self.by_kind.values())

    @property
    def total(self) -> int:
        return sum(t for _, t in self.by_kind.values())

    def cells(self) -> list[tuple[int, int]]:
        return [self.by_kind.get(kind, (0, 0)) for kind in Assignment.Kind.values]


def progress(statuses: tuple[str, ...] = (Physician.Status.TRIAL, Physician.Status.ACTIVE)) -> list[ProgressRow]:
    """Done / assigned per physician and kind (2 queries)."""
    rows = {
        p.id: ProgressRow(p)
        for p in Physician.objects.filter(role=Physician.Role.PHYSICIAN, status__in=statuses, user__isnull=False)
        .select_related("user")
        .order_by("user__username", "id")
    }
    counts = (
        Assignment.objects.filter(physician_id__in=list(rows))
        .exclude(status__in=Assignment.INACTIVE)
        .values("physician_id", "kind")
        .annotate(total=Count("id"), done=Count("id", filter=Q(status=Assignment.Status.DONE)))
    )
    for row in counts:
        rows[row["physician_id"]].by_kind[row["kind"]] = (row["done"], row["total"])
    return list(rows.values())


def physicians_for_vetting(status: str = "") -> QuerySet[Physician]:
    physicians = Physician.objects.filter(role=Physician.Role.PHYSICIAN, user__isnull=False).select_related("user")
    if status:
        physicians = physicians.filter(status=status)
    return physicians.order_by("status", "user__username")


def withdrawn_tasks(limit: int = 50) -> list[Assignment]:
    """The latest tasks withdrawn from physicians, with the note saying why (assignment page)."""
    # Once the same item has been given to someone else, the row has done its work.
    reassigned = Assignment.objects.filter(
        kind=OuterRef("kind"),
        conversation=OuterRef("conversation"),
        response=OuterRef("response"),
        criterion=OuterRef("criterion"),
        status__in=(Assignment.Status.OPEN, Assignment.Status.DONE),
    ).exclude(physician=OuterRef("physician"))
    return list(
        Assignment.objects.filter(status=Assignment.Status.WITHDRAWN)
        .filter(~Exists(reassigned))
        .select_related("physician__user", "conversation", "criterion")
        .order_by("-id")[:limit]
    )


# Conversations listed by name in a change preview; the rest are counted.
PREVIEW_ROWS = 50


def preview_rows(conversation_ids: Sequence[int]) -> dict:
    """The first conversations of a planned change, with theme and opening words, and how many in all."""
    shown = list(conversation_ids[:PREVIEW_ROWS])
    found = {
        c.id: c for c in Conversation.objects.filter(id__in=shown).only("id", "code", "prompt_id", "theme", "messages")
    }
    return {"rows": [found[cid] for cid in shown if cid in found], "total": len(conversation_ids)}
