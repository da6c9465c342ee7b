"""Guidelines per kind of task: curators write them, physicians see them the first time they open such a task."""

from django.db.models import Exists, OuterRef

from annotation.models import Guideline, GuidelineRead, Physician


def guideline_save(*, kind: str, text: str, by: Physician | None) -> Guideline:
    guideline, _ = Guideline.objects.update_or_create(kind=kind, defaults={"text": text, "updated_by": by})
    return guideline


def guideline_mark_read(*, physician: Physician, kind: str) -> None:
    GuidelineRead.objects.get_or_create(physician=physician, kind=kind)


def guideline_for_task(*, physician: Physician, kind: str) -> dict:
    """What a task page shows: the kind's guideline, and whether to open it (the first time, once written)."""
    # One query: the guideline and whether this physician has read it.
    read = GuidelineRead.objects.filter(physician=physician, kind=OuterRef("kind"))
    guideline = Guideline.objects.filter(kind=kind).annotate(read=Exists(read)).first()
    written = guideline is not None and bool(guideline.text.strip())
    first_time = guideline is not None and written and not guideline.read
    return {"guideline": guideline if written else None, "guideline_first_time": first_time, "task_kind": kind}
