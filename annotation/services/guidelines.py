"""Guidelines per kind of task: curators write them, physicians see them the first time they open such a task."""

from django.db.models import Exists, OuterRef

from annotation.models import Guideline, GuidelineRead, Physician
from healthbench_web.compiled_query import SENTINEL_TEXT, CompiledQuery, sentinels

# Every task page asks: compiled once (healthbench_web/compiled_query.py).
_guideline = CompiledQuery(
    lambda physician_id, kind: (
        Guideline.objects.filter(kind=kind)
        .annotate(read=Exists(GuidelineRead.objects.filter(physician_id=physician_id, kind=OuterRef("kind"))))
        .order_by("pk")[:1]
    ),
    *sentinels(1),
    SENTINEL_TEXT,
)


def guideline_save(*, kind: str, text: str, by: Physician | None) -> Guideline:
    guideline, _ = Guideline.objects.update_or_create(kind=kind, defaults={"text": text, "updated_by": by})
    return guideline


def guideline_mark_read(*, physician: Physician, kind: str) -> None:
    GuidelineRead.objects.get_or_create(physician=physician, kind=kind)


def guideline_for_task(*, physician: Physician, kind: str) -> dict:
    """What a task page shows: the kind's guideline, and whether to open it (the first time, once written)."""
    # One query: the guideline and whether this physician has read it.
    guideline = _guideline.first(physician.id, kind)
    written = guideline is not None and bool(guideline.text.strip())
    first_time = guideline is not None and written and not guideline.read
    return {"guideline": guideline if written else None, "guideline_first_time": first_time, "task_kind": kind}
