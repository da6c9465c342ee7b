"""The per-response grading mode: every criterion of a response in one call (chunks of at most
CRITERIA_PER_CALL), a criterion whose entry is unusable asked again alone in the
per-criterion mode. Its prompt, schema and the reading of its answer are
grading.pipeline.response_prompt; a chunk's cache key holds the mode, the prompt's sha256 and
the explanation length; a criterion's, the chunk's key and its place in it."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from grading.pipeline import response_prompt
from grading.pipeline.batch_requests import GraderRequest, conversation_blocks, filled_item, request_key
from grading.pipeline.endpoint import EndpointConfigError
from grading.pipeline.grader_prompt import MalformedAnswer, render
from grading.pipeline.modes.base import EstimateCounts, Mode, cacheable
from grading.pipeline.request_shape import chunk_request
from grading.pipeline.response_prompt import (
    CRITERIA_PER_CALL,
    DEFAULT_EXPLANATION,
    EXPLANATIONS,
    RESPONSE_TEMPLATE,
    RESPONSE_TEMPLATE_HASH,
    chunk_bounds,
    line_overhead,
    read_chunk_answer,
    render_chunk,
)

if TYPE_CHECKING:
    from grading.models import Run
    from grading.pipeline.batch_requests import Item
    from grading.pipeline.endpoint import CallTarget
    from grading.pipeline.replies import Reply

NAME = "per-response"
# The JSON around a call's entries (an entry's own tokens depend on the explanation length:
# response_prompt.EXPLANATIONS).
CHUNK_ANSWER_TOKENS = 8


class PerResponse(Mode):
    name = NAME
    takes_explanation = True
    fills_template = False

    def snapshot_fields(self, explanation: str) -> dict[str, Any]:
        return {
            "grading_mode": NAME,
            "explanation_length": explanation or DEFAULT_EXPLANATION,
            "criteria_per_call": CRITERIA_PER_CALL,
            "response_template": RESPONSE_TEMPLATE,
            "response_prompt_hash": RESPONSE_TEMPLATE_HASH,
        }

    def requests(self, run: Run, grader: CallTarget, items: list[Item]) -> dict[str, GraderRequest]:
        """Per response: its criteria in chunks of at most the run's limit, one request each.
        A criterion's key is the chunk's request key and its place in the chunk, so the grade
        of an identical earlier chunk is found criterion by criterion."""
        config = run.grader_config
        if config is None or config.criteria_per_call is None:
            raise EndpointConfigError(f"run {run.name} has no per-response grader settings")
        blocks = conversation_blocks(run, items)
        by_response: dict[int, list[Item]] = {}
        for item in items:
            by_response.setdefault(item.response_id, []).append(item)
        head = f"{NAME} {config.response_prompt_hash} {config.explanation_length}"
        requests: dict[str, GraderRequest] = {}
        for response_id, criteria in by_response.items():
            block = blocks[response_id]
            for start, stop in chunk_bounds(len(criteria), config.criteria_per_call):
                chunk = criteria[start:stop]
                prompt = render_chunk(
                    conversation=block, items=[(i.text, i.points) for i in chunk], explanation=config.explanation_length
                )
                key = request_key(grader, head, prompt)
                if key not in requests:
                    fallbacks = [
                        render(config.prompt_template, conversation=block, item=filled_item(run, i)) for i in chunk
                    ]
                    keys = [hashlib.sha256(f"{key}\n{k}".encode()).hexdigest() for k in range(len(chunk))]
                    requests[key] = GraderRequest(prompt, keys, [], fallbacks)
                requests[key].items.append(chunk)
        return requests

    def prompt_overhead(self, template: str, explanation: str) -> int:
        return response_prompt.rendered_overhead(explanation)

    def calls_and_chars(
        self, n: int, *, conversation_chars: int, item_chars: int, overhead: int, template: str, explanation: str
    ) -> tuple[int, int, int]:
        items = item_chars + n * 6  # "[-5] " before each text
        calls = len(chunk_bounds(n, CRITERIA_PER_CALL))  # the limit the snapshot records
        lines = sum(line_overhead(k) for k in range(n))
        prefix = response_prompt.shared_prefix_length(conversation_chars=conversation_chars, explanation=explanation)
        return calls, calls * (overhead + conversation_chars) + items + lines, cacheable(calls, prefix)

    def answer_tokens(self, explanation: str, *, calls: int, grades: int) -> int:
        return grades * EXPLANATIONS[explanation][1] + calls * CHUNK_ANSWER_TOKENS

    def estimate_line(self, counts: EstimateCounts) -> str:
        words, per_entry = EXPLANATIONS[counts.explanation_length or DEFAULT_EXPLANATION]
        return (
            f"Grading per response: {counts.grader_calls:,} grader calls for {counts.grades:,} criteria on "
            f"{counts.responses:,} responses (at most {CRITERIA_PER_CALL} criteria a call), "
            f"about {counts.prompt_tokens:,} prompt tokens and {counts.completion_tokens:,} completion tokens "
            f"(~{per_entry} per criterion, explained in {words}; retries, re-asks and per-criterion "
            "fallbacks come on top)."
        )

    def check_request(
        self, target: CallTarget, *, conversation: str, criterion: str, points: int, template: str
    ) -> tuple[str, dict]:
        return chunk_request(target, render_chunk(conversation=conversation, items=[(criterion, points)]))

    def check_verdict(self, reply: Reply, *, lenient: bool) -> str:
        chunk = read_chunk_answer(reply.content, 1)
        if 1 not in chunk.verdicts:
            raise MalformedAnswer("the answer holds no verdict for the criterion")
        return "met" if chunk.verdicts[1].met else "not met"


MODE = PerResponse()
