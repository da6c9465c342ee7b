"""The one place annotation reaches into grading (tests/test_architecture.py keeps it so).

Grading builds on annotation (runs grade conversations against criteria), so the dependency
points from grading to annotation. Two things of grading's are part of annotation's work:

* `Response`: physicians label model responses, which grading stores;
* the Hard subset, built from run scores: its page lives with the other subset pages, so the
  curator's subset views take the runs to rank by and the ranking from here.
"""

from collections.abc import Sequence

from django.db.models import QuerySet

from grading.models import Response, Run
from grading.reports.hard_subset import conversation_mean_scores, hardest_conversations, rankable_runs

__all__ = [
    "Response",
    "Run",
    "conversation_mean_scores",
    "hardest_conversations",
    "model_responses",
    "rankable_runs",
]


def model_responses(conversation_ids: Sequence[int]) -> QuerySet:
    """(conversation id, response id) of the conversations' model responses, in that order: the
    responses physicians label and read as references (never a physician's own)."""
    return (
        Response.objects.filter(conversation_id__in=conversation_ids)
        .exclude(source=Response.Source.PHYSICIAN)
        .order_by("conversation_id", "id")
        .values_list("conversation_id", "id")
    )
