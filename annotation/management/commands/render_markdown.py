from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand

from annotation.grading_seam import Response
from annotation.models import ConsensusCriterion, Conversation, Criterion, Guideline, IdealResponse
from annotation.services.rendered_markdown import markdown_fill


def _stored_texts() -> Iterator[str]:
    for messages in Conversation.objects.values_list("messages", flat=True).iterator(chunk_size=2000):
        yield from (m["content"] for m in messages if isinstance(m, dict) and isinstance(m.get("content"), str))
    for model in (Criterion, ConsensusCriterion, Guideline, IdealResponse, Response):
        yield from model.objects.values_list("text", flat=True).iterator(chunk_size=2000)


class Command(BaseCommand):
    help = (
        "Render the Markdown of every stored text (turns, responses, criteria, ideal responses, guidelines) "
        "that is not in the store yet, so that no page renders it on a physician's request. Pages fill the "
        "store anyway, the first time they show a text; this does it for a whole data set at once."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        rendered = markdown_fill(_stored_texts())
        self.stdout.write(f"Rendered {rendered:,} text(s) not stored before.")
