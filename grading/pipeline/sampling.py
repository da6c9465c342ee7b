"""Sampling: k responses per conversation from a policy model on an OpenAI-compatible endpoint.

A sampled run's batch first makes sure each of its conversations has its k samples, then
grades them. Samples are stored as Responses of the run (source ``sampled``, the model's
name, the sampling parameters, ``sample_index`` 0..k-1, token usage); the database keeps one
per (run, conversation, sample_index), so a redelivered batch never samples twice what it
stored, and samples only what is missing. A sample that could not be drawn is kept as a
SampleFailure with its reason (unless the run itself failed: then a resume draws it).

A refusal is stored as the response (its words are what a user would read), marked
``refused``; a reply cut off at the output limit is stored as it came, marked ``truncated``
with the limit it hit. Both are graded, and counted on the run page, in the API and in the
report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from django.db.models import QuerySet

from annotation.models import Conversation
from grading.models import Response, Run, SampleFailure
from grading.pipeline.client import CallFailed, ChatReply, FailureWatch, RetryPolicy, chat
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.rate_limit import RateLimiter
from healthbench_web.storable import REASON_CHARS, RESPONSE_CHARS, storable


@dataclass(frozen=True)
class SampleJob:
    conversation_id: int
    sample_index: int


def sample_parameters(endpoint: CallTarget) -> dict:
    if endpoint.reasoning:
        parameters: dict = {"reasoning_effort": endpoint.reasoning_effort}
    else:
        parameters = {"temperature": endpoint.temperature}
    parameters |= {"max_tokens": endpoint.max_tokens, "base_url": endpoint.base_url}
    if endpoint.api_style != "chat":
        parameters["api_style"] = endpoint.api_style
    if endpoint.system_message:
        parameters["system_message"] = endpoint.system_message
    return parameters


def samples_of(run: Run, conversation_ids: list[int]) -> QuerySet[Response]:
    return Response.objects.filter(run=run, conversation_id__in=conversation_ids)


def sample_jobs_missing(run: Run, conversation_ids: list[int]) -> list[SampleJob]:
    have = set(samples_of(run, conversation_ids).values_list("conversation_id", "sample_index"))
    # A sample that failed stays failed, like a failed grade, until a resume retries failures.
    have |= set(
        SampleFailure.objects.filter(run=run, conversation_id__in=conversation_ids).values_list(
            "conversation_id", "sample_index"
        )
    )
    return [SampleJob(c, k) for c in conversation_ids for k in range(run.samples) if (c, k) not in have]


def sample_messages(conversation_ids: list[int]) -> dict[int, list[dict]]:
    """The chat messages to send per conversation: its turns, role and content only."""
    # The messages column is JSON stored compressed (annotation.fields); the stubs see text.
    rows = cast(
        "list[tuple[int, list[dict]]]",
        list(Conversation.objects.filter(id__in=conversation_ids).values_list("id", "messages")),
    )
    return {cid: [{"role": m["role"], "content": m["content"]} for m in messages] for cid, messages in rows}


async def ask_policy(
    endpoint: CallTarget,
    messages: list[dict],
    *,
    limiter: RateLimiter,
    policy: RetryPolicy,
    watch: FailureWatch | None = None,
) -> ChatReply | CallFailed:
    """One sample; a call that gave up comes back as its CallFailed, to be stored."""
    try:
        reply = await chat(endpoint, messages, limiter=limiter, policy=policy, watch=watch)
    except CallFailed as exc:
        return exc
    if watch is not None:
        watch.succeeded()  # refused or cut off, it is the model's answer and is stored
    return reply


def samples_store(run: Run, endpoint: CallTarget, results: list[tuple[SampleJob, ChatReply | CallFailed]]) -> None:
    """Store the samples drawn and the failures of those that could not be (fatal ones
    aside: the run stops on those, and a resume draws the sample)."""
    replies = [(job, r) for job, r in results if isinstance(r, ChatReply)]
    failures = [(job, r) for job, r in results if isinstance(r, CallFailed) and not r.fatal]
    if failures:
        SampleFailure.objects.bulk_create(
            [
                SampleFailure(
                    run=run,
                    conversation_id=job.conversation_id,
                    sample_index=job.sample_index,
                    error=storable(str(exc), REASON_CHARS),
                    attempts=exc.attempts,
                )
                for job, exc in failures
            ],
            ignore_conflicts=True,
        )
    parameters = sample_parameters(endpoint)
    Response.objects.bulk_create(
        [
            Response(
                conversation_id=job.conversation_id,
                run=run,
                text=storable(reply.content, RESPONSE_CHARS),
                source=Response.Source.SAMPLED,
                model_name=endpoint.model,
                parameters=parameters,
                sample_index=job.sample_index,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                cached_tokens=reply.cached_tokens,
                reasoning_tokens=reply.reasoning_tokens,
                cache_write_tokens=reply.cache_write_tokens,
                refused=reply.refused,
                truncated=reply.truncated,
                output_limit=endpoint.max_tokens if reply.truncated else None,
            )
            for job, reply in replies
        ],
        # Another claim of this batch may have stored some of them already.
        ignore_conflicts=True,
    )
