"""The per-criterion grading mode: one call per response and criterion, the reference's way.
Its prompt is the run's grader template and its answer is read by
grading.pipeline.grader_prompt; a request's cache key holds the template's sha256."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grading.pipeline.batch_requests import GraderRequest, conversation_blocks, filled_item, request_key
from grading.pipeline.endpoint import EndpointConfigError
from grading.pipeline.grader_prompt import parse_answer, render, rendered_length, rubric_item, shared_prefix_length
from grading.pipeline.modes.base import EstimateCounts, Mode, cacheable
from grading.pipeline.request_shape import criterion_request

if TYPE_CHECKING:
    from grading.models import Run
    from grading.pipeline.batch_requests import Item
    from grading.pipeline.endpoint import CallTarget
    from grading.pipeline.replies import Reply

NAME = "per-criterion"
ANSWER_TOKENS = 80  # a grader's JSON answer: a sentence or two and a boolean


class PerCriterion(Mode):
    name = NAME

    def snapshot_fields(self, explanation: str) -> dict[str, Any]:
        # Nothing: the names (and so the identity) of per-criterion snapshots stay as they were.
        return {}

    def requests(self, run: Run, grader: CallTarget, items: list[Item]) -> dict[str, GraderRequest]:
        blocks = conversation_blocks(run, items)
        if run.grader_config is None:  # only runs graded here have batches
            raise EndpointConfigError(f"run {run.name} has no grader")
        template, prompt_hash = run.grader_config.prompt_template, run.grader_config.prompt_hash
        requests: dict[str, GraderRequest] = {}
        for item in items:
            prompt = render(template, conversation=blocks[item.response_id], item=filled_item(run, item))
            key = request_key(grader, prompt_hash, prompt)
            requests.setdefault(key, GraderRequest(prompt, [key], [])).items.append([item])
        return requests

    def prompt_overhead(self, template: str, explanation: str) -> int:
        return rendered_length(template, conversation_chars=0, item_chars=0)

    def calls_and_chars(
        self, n: int, *, conversation_chars: int, item_chars: int, overhead: int, template: str, explanation: str
    ) -> tuple[int, int, int]:
        items = item_chars + n * 6  # "[-5] " before each text
        prefix = shared_prefix_length(template, conversation_chars=conversation_chars)
        return n, n * (overhead + conversation_chars) + items, cacheable(n, prefix)

    def answer_tokens(self, explanation: str, *, calls: int, grades: int) -> int:
        return calls * ANSWER_TOKENS

    def estimate_line(self, counts: EstimateCounts) -> str:
        return (
            f"Grading: {counts.grader_calls:,} grader calls on {counts.responses:,} responses, about "
            f"{counts.prompt_tokens:,} prompt tokens and {counts.completion_tokens:,} completion tokens "
            f"(~{ANSWER_TOKENS} per answer; retries and re-asks come on top)."
        )

    def check_request(
        self, target: CallTarget, *, conversation: str, criterion: str, points: int, template: str
    ) -> tuple[str, dict]:
        return criterion_request(
            target, render(template, conversation=conversation, item=rubric_item(criterion, points))
        )

    def check_verdict(self, reply: Reply, *, lenient: bool) -> str:
        return "met" if parse_answer(reply.content, lenient=lenient).met else "not met"


MODE = PerCriterion()
