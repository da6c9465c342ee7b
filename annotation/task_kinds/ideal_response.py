"""Writing an ideal response: one task per conversation, done on the ideal-response editor (kept
as a draft while typed, and open to improvement after it is saved), under the condition the
curator chose: without references, or with the references the task names beside the editor."""

from annotation.models import Assignment, IdealResponse
from annotation.task_kinds.base import TaskKind


class IdealResponseKind(TaskKind):
    value = Assignment.Kind.IDEAL_RESPONSE
    page = "ideal_editor"
    drafts = {"ideal": 20000}

    def condition(self, condition: str) -> str:
        return condition or IdealResponse.Condition.NO_REFERENCE


KIND = IdealResponseKind()
