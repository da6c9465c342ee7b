"""Time on task, recorded by the server: a task's page opened, a draft saved, an answer sent.

Each is one `TaskEvent` row kept with the assignment; the physician page sums a task's gaps
between events, idle ones cut out (grading/physicians/quality.py, `active_seconds`). Only the
task's own physician reaches these pages (annotation/access.py), so every event is theirs.
Opening a task page is the one GET that writes (tests/test_no_write_on_get.py allows it).
"""

from annotation.models import Assignment, TaskEvent
from annotation.services.text_drafts import KEY, draft_field_kind


def task_event(*, task: Assignment, kind: str, sign_warnings: int = 0) -> None:
    if task.status in Assignment.INACTIVE:
        return
    TaskEvent.objects.create(assignment_id=task.pk, kind=kind, sign_warnings=sign_warnings)


def task_opened(task: Assignment) -> None:
    task_event(task=task, kind=TaskEvent.Kind.OPEN)


def task_answered(task: Assignment, *, sign_warnings: int = 0) -> None:
    task_event(task=task, kind=TaskEvent.Kind.ANSWER, sign_warnings=sign_warnings)


def draft_activity(*, physician_id: int, key: str) -> None:
    """A draft saved as the physician types is work on the task whose field it keeps."""
    match = KEY.match(key)
    if not match:
        return
    tasks = Assignment.objects.filter(physician_id=physician_id).exclude(status__in=Assignment.INACTIVE)
    if match["task"]:
        tasks = tasks.filter(code=match["task"], kind=draft_field_kind(match))
    else:
        tasks = tasks.filter(kind=draft_field_kind(match), conversation__code=match["conversation"])
    task_id = tasks.values_list("id", flat=True).first()
    if task_id is not None:
        TaskEvent.objects.create(assignment_id=task_id, kind=TaskEvent.Kind.DRAFT)
