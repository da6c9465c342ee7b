"""Conversation.rubric_version: moved on by every writer of criteria, read by a finished run's
drift notice (grading.drift), which counts again only the conversations whose version moved."""

from collections.abc import Iterable

from django.db.models import F

from annotation.models import Conversation
from healthbench_web.bulk import chunks


def rubric_changed(conversation_ids: Iterable[int]) -> None:
    """Move on the rubric version of conversations whose criteria were added, edited or
    deleted. Call it in the transaction that writes the criteria (the rubric editor, consensus
    votes, both importers, the admin), so that the version and the criteria commit together."""
    for chunk in chunks(sorted(set(conversation_ids))):
        Conversation.objects.filter(id__in=chunk).update(rubric_version=F("rubric_version") + 1)
