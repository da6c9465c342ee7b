"""The task kinds, one module each, registered in KINDS: the only table of them. A new kind is a
module that fills in annotation.task_kinds.base.TaskKind, its line below, its value among
annotation.models.Assignment.Kind's choices and the migration those choices make, and its page
(tests/test_task_kind_registry.py holds the table and the choices together, and counts the
places outside the kinds' modules that name a kind). The kinds import the models and the
grading seam only, never selectors, services or views: those all ask them.
"""

from annotation.task_kinds import consensus_vote, ideal_response, label, rubric
from annotation.task_kinds.base import TaskKind

KINDS: dict[str, TaskKind] = {
    kind.value: kind
    for kind in (
        rubric.KIND,
        ideal_response.KIND,
        consensus_vote.KIND,
        label.KIND,
    )
}
# The kind the curator's assignment form starts on.
FIRST_OFFERED = consensus_vote.KIND.value


def kind_of(value: str) -> TaskKind:
    """The kind whose `Assignment.kind` value is `value`; KeyError for a value that is none."""
    return KINDS[value]
