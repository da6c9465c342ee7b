"""Row locks shared by services."""

from annotation.models import Conversation


def conversation_lock(conversation_id: int) -> None:
    """Lock one conversation row until the transaction ends (call inside transaction.atomic).

    Writers of one conversation's rubric queue here: criterion positions, and the decision to
    attach a consensus criterion, which must see every vote committed before it. On SQLite the
    whole database is locked by BEGIN IMMEDIATE instead, and FOR UPDATE is skipped.
    """
    list(Conversation.objects.select_for_update().filter(id=conversation_id).values_list("id", flat=True))
