"""What a batch asks the grader: its items (the criteria of each response, for a re-grade or a
sampled run) and the grader requests they make, per criterion or per response, each with the
request key an identical earlier grade is found by. It reads criteria, conversations and
earlier grades and writes nothing: claiming a batch and storing its grades are
grading.pipeline.batches'."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import cast

from annotation.models import Conversation
from grading.models import Grade, Response, Run
from grading.pipeline.client import GradeOutcome
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.grader_prompt import conversation_block, rubric_item
from grading.pipeline.sampling import samples_of
from grading.plans import labelled_items, planned_rubrics, version_rubrics
from grading.prompt_filling import policy_turns


@dataclass(frozen=True, slots=True)
class Item:
    response_id: int
    criterion_id: int | None
    position: int
    text: str
    points: int
    tags: list


def items_regraded(run: Run, response_ids: list[int]) -> list[Item]:
    """The criteria the source run graded each response on, as it graded them; for a run of
    rubric changes, the criteria its plan froze for each response's conversation; for a run
    on a frozen version of responses it did not sample (the physicians'), each conversation's
    rubric in the version; for a run of the physician-labelled items, the criteria its plan
    froze for each response."""
    if run.plan == Run.Plan.LABELLED:
        planned = labelled_items(run, response_ids)
        return [
            Item(response_id, p.criterion_id, position, p.text, p.points, p.tags)
            for response_id in sorted(planned)
            for position, p in enumerate(planned[response_id])
        ]
    if run.plan in (Run.Plan.RUBRIC_CHANGES, Run.Plan.SUBSET_VERSION):
        # A run of rubric changes, or one on a frozen version whose responses it did not sample
        # (the physicians': grading.pipeline.physician_responses): each response on its
        # conversation's planned rubric.
        conversation_of = dict(Response.objects.filter(id__in=response_ids).values_list("id", "conversation_id"))
        rubric = planned_rubrics(run, sorted(set(conversation_of.values())))
        return [
            Item(response_id, p.criterion_id, position, p.text, p.points, p.tags)
            for response_id in sorted(conversation_of)
            for position, p in enumerate(rubric.get(conversation_of[response_id], []))
        ]
    rows = (
        Grade.objects.filter(run=run.responses_from, response_id__in=response_ids)
        .order_by("response_id", "position")
        .values_list("response_id", "criterion_id", "position", "criterion_text", "points", "tags")
    )
    return [Item(*row) for row in rows]


def items_sampled(run: Run, conversation_ids: list[int]) -> list[Item]:
    """Each sample on its conversation's rubric in the run's frozen version (only the cluster
    criteria for Consensus): a rubric edit after the launch changes nothing the run grades."""
    rubric = version_rubrics(run, conversation_ids)
    return [
        Item(response_id, p.criterion_id, position, p.text, p.points, p.tags)
        for response_id, conversation_id in samples_of(run, conversation_ids)
        .order_by("id")
        .values_list("id", "conversation_id")
        for position, p in enumerate(rubric.get(conversation_id, []))
    ]


def request_key(grader: CallTarget, prompt_hash: str, prompt: str) -> str:
    """Identifies a grader request: who answers it, how (API style, sampling or reasoning
    settings, structured output), and the exact prompt sent (which holds the conversation,
    the response and the criterion's text and points)."""
    how = [grader.base_url, grader.model, grader.temperature, grader.max_tokens, prompt_hash]
    if grader.api_style != "chat" or grader.reasoning or grader.structured_output:
        # Only then: the keys of grades stored before these settings existed stay valid.
        how += [grader.api_style, grader.reasoning, grader.reasoning_effort, grader.structured_output]
    if grader.system_message:
        how.append(grader.system_message)
    head = json.dumps(how)
    return hashlib.sha256(f"{head}\n{prompt}".encode()).hexdigest()


@dataclass
class GraderRequest:
    """One grader call and the items it answers: per criterion, one item (`keys` its request
    key); per response, a chunk of one response's criteria (`keys` one per criterion, and
    `fallbacks` the per-criterion prompt of each). `items` holds one list per response that
    asks exactly this (more than one only when a response is repeated)."""

    prompt: str
    keys: list[str]
    items: list[list[Item]]
    fallbacks: list[str] | None = None


def conversation_blocks(run: Run, items: list[Item]) -> dict[int, str]:
    responses = {
        rid: (text, cid, source, parameters)
        for rid, text, cid, source, parameters in Response.objects.filter(
            id__in={i.response_id for i in items}
        ).values_list("id", "text", "conversation_id", "source", "parameters")
    }
    # The messages column is JSON stored compressed (annotation.fields); the stubs see text.
    messages = cast(
        "dict[int, list]",
        dict(Conversation.objects.filter(id__in={r[1] for r in responses.values()}).values_list("id", "messages")),
    )
    reference = run.prompt_filling == Run.PromptFilling.REFERENCE
    return {
        rid: conversation_block(
            [
                *(policy_turns(sampled=source == Response.Source.SAMPLED, parameters=parameters) if reference else []),
                *messages[cid],
            ],
            text,
        )
        for rid, (text, cid, source, parameters) in responses.items()
    }


def filled_item(run: Run, item: Item) -> str:
    """The rubric item as the template gets it: ``[points] text`` as simple-evals'
    ``str(RubricItem)`` writes it, but a labelled item's bare text, as
    ``healthbench_meta_eval.py`` sends its ``rubric``."""
    if run.plan == Run.Plan.LABELLED and run.prompt_filling == Run.PromptFilling.REFERENCE:
        return item.text
    return rubric_item(item.text, item.points)


def cached_outcomes(keys: list[str]) -> dict[str, GradeOutcome]:
    found: dict[str, GradeOutcome] = {}
    for start in range(0, len(keys), 500):
        rows = Grade.objects.filter(request_key__in=keys[start : start + 500], status=Grade.Status.GRADED).values_list(
            "request_key", "met", "explanation", "raw_output", "mode"
        )
        for key, met, explanation, raw, mode in rows:
            if key is not None:
                found.setdefault(
                    key, GradeOutcome(met=met, explanation=explanation, raw_output=raw, fallback=False, mode=mode)
                )
    return found
