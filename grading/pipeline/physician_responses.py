"""The physicians' responses as a response source: each HealthBench Professional row carries a
`physician_response` (kept with its conversation, annotation.formats.professional), and a run
may grade those with the rubric as it grades a model's samples, so that the physician baseline
is reported beside the models (its "model" is PHYSICIAN_MODEL).

A conversation's physician response becomes one Response (source ``physician``), created at
the first launch that grades it and shared by every later one with the same text: two graders
of the physicians' responses grade the same responses, as two re-grades of a run do. A row
imported again with another text gets a new Response; the old one keeps its grades.
"""

from __future__ import annotations

from typing import cast

from annotation.models import Conversation, Subset
from grading.models import Response
from healthbench_web.bulk import chunks

# The name a run of the physicians' responses gives its "model" (Run.policy_model), and the
# model name of the responses themselves.
PHYSICIAN_MODEL = "physician"
# Where a Response came from, in its parameters: what export_run and the pages may say.
ORIGIN = {"from": "physician_response"}


def physician_texts(subset: Subset) -> dict[int, str]:
    """conversation id -> its physician response, for the subset's conversations that have one
    (a Professional row with a non-empty `physician_response`)."""
    # The professional column is JSON stored as text (annotation.fields); the stubs see text.
    rows = cast(
        "list[tuple[int, dict | None]]",
        list(
            Conversation.objects.filter(memberships__subset=subset, professional__isnull=False)
            .order_by("id")
            .values_list("id", "professional")
        ),
    )
    texts = {}
    for conversation_id, professional in rows:
        text = ((professional or {}).get("fields") or {}).get("physician_response")
        if isinstance(text, str) and text.strip():
            texts[conversation_id] = text
    return texts


def no_physician_responses(subset: Subset) -> str:
    """The refusal of a run of the physicians' responses on a subset without any."""
    return (
        f"subset {subset.name} has no physician responses: only HealthBench Professional rows carry one "
        "(physician_response); import a Professional file into it, or choose another source"
    )


def physician_responses_ensure(texts: dict[int, str]) -> dict[int, int]:
    """conversation id -> the id of the Response holding its physician response `texts[id]`,
    created where none holds that text yet. Call inside the launch's transaction."""
    found: dict[int, int] = {}
    for chunk in chunks(sorted(texts)):
        for response_id, conversation_id, text in (
            Response.objects.filter(
                conversation_id__in=chunk, source=Response.Source.PHYSICIAN, model_name=PHYSICIAN_MODEL
            )
            .order_by("id")
            .values_list("id", "conversation_id", "text")
        ):
            if text == texts[conversation_id]:
                found.setdefault(conversation_id, response_id)
    missing = [
        Response(
            conversation_id=conversation_id,
            text=texts[conversation_id],
            source=Response.Source.PHYSICIAN,
            model_name=PHYSICIAN_MODEL,
            parameters=ORIGIN,
        )
        for conversation_id in sorted(texts)
        if conversation_id not in found
    ]
    for response in Response.objects.bulk_create(missing):
        found[response.conversation_id] = response.id
    return found
