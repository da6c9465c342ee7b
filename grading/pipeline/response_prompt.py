"""The per-response grader request: every criterion of one response judged in one call (or a
few calls, for a long rubric), and how its answer is read. Pure Python, no Django.

* The prompt of the per-response grading mode (grading.pipeline.modes.per_response; the
  other, per criterion, is the reference's way). A per-response run records its explanation
  length and the template below (by its sha256).
* A response's criteria are split into chunks of at most ``CRITERIA_PER_CALL``, as even as
  possible (23 criteria: 12 + 11), so that one answer never grows past what a grader writes
  reliably in one go, and a cut-off answer loses few verdicts.
* The prompt is laid out for the provider's prompt cache: the instructions (with the
  explanation length, fixed for the run), then the conversation and the response, then the
  numbered criteria of the chunk, the only part that differs between the calls about one
  response.
* The answer is ``{"criteria": [{"id": 1, "explanation": str, "criteria_met": bool}, ...]}``,
  ids counted from 1 within the chunk, sent as a strict JSON schema where the endpoint honours
  one. It is read tolerantly like a per-criterion answer (grading.pipeline.grader_prompt).
  An entry counts only when its id is a known one given once and its ``criteria_met`` is a
  JSON boolean; every other criterion of the chunk is left to a per-criterion call
  (``ChunkAnswer.fallback``). An answer with no ``criteria`` list at all is unreadable, and
  the grader is asked again, as for a per-criterion answer.

``chunk_messages`` and ``read_chunk_answer`` are what any transport needs, live calls
(grading.pipeline.client) as well as a provider's batch file.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from grading.pipeline.grader_prompt import (
    CONVERSATION_SECTION,
    JUDGING_RULES,
    GraderAnswer,
    MalformedAnswer,
    json_objects,
    rubric_item,
    template_hash,
)

# The most criteria one call judges. HealthBench rubrics have 11.4 criteria on average and
# few pass 20, so most responses take one call; an answer of 20 one-sentence entries is
# about 700 output tokens, well inside every grader's output limit.
CRITERIA_PER_CALL = 20

# The explanation each entry gives: output is most of a per-response call's cost, so its
# length is a setting of the mode. Key: (words asked for in the prompt, tokens the estimate
# assumes per entry, JSON included).
EXPLANATIONS: dict[str, tuple[str, int]] = {
    "words": ("a few words (at most ten)", 22),
    "sentence": ("one short sentence", 36),
    "sentences": ("two or three sentences", 70),
}
DEFAULT_EXPLANATION = "sentence"

CONVERSATION = "<<conversation>>"
RUBRIC_ITEMS = "<<rubric_items>>"
EXPLANATION = "<<explanation>>"
_PLACEHOLDER = re.compile(r"<<(conversation|rubric_items|explanation)>>")

RESPONSE_TEMPLATE = (
    """\
You are reviewing one reply written by an AI assistant in a health conversation. Physicians
wrote a rubric for this conversation; you judge the reply against each of the numbered rubric
items shown after the conversation, every item on its own.

# How to judge each item
- Decide one thing: does the final reply do what the criterion describes? Nothing else about
  the reply matters for that item, other items do not change it, and there is no partial
  credit.
"""
    + JUDGING_RULES
    + """
# Your answer
Answer with a single JSON object and nothing else, holding one entry per rubric item, in the
items' order, each with the item's number as its id:
{"criteria": [
  {"id": 1, "explanation": "the reason", "criteria_met": true},
  {"id": 2, "explanation": "the reason", "criteria_met": false}
]}
Each explanation is <<explanation>>. criteria_met must be the JSON boolean true or false.

"""
    + CONVERSATION_SECTION
    + """
# The rubric items
Each is shown as its number, then [points] and the criterion.

<<rubric_items>>
"""
)
RESPONSE_TEMPLATE_HASH = template_hash(RESPONSE_TEMPLATE)

# The answer as a strict schema (OpenAI's structured outputs: every property required, no
# others; no length bounds, which strict mode does not take everywhere).
CHUNK_SCHEMA_NAME = "rubric_grades"
CHUNK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "criteria": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "explanation": {"type": "string"},
                    "criteria_met": {"type": "boolean"},
                },
                "required": ["id", "explanation", "criteria_met"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["criteria"],
    "additionalProperties": False,
}


def check_explanation(explanation: str) -> str:
    if explanation not in EXPLANATIONS:
        raise ValueError(f"explanation length {explanation!r} is not one of {', '.join(EXPLANATIONS)}")
    return explanation


def chunk_bounds(n: int, limit: int = CRITERIA_PER_CALL) -> list[tuple[int, int]]:
    """(start, stop) of each call's criteria among a response's `n`: as few calls as the
    limit allows, of sizes that differ by one at most."""
    if n <= 0:
        return []
    calls = math.ceil(n / limit)
    size, extra = divmod(n, calls)
    bounds, start = [], 0
    for k in range(calls):
        stop = start + size + (1 if k < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def criteria_block(items: Sequence[tuple[str, int]]) -> str:
    """``1. [5] text`` per (text, points), one a line."""
    return "\n".join(f"{number}. {rubric_item(text, points)}" for number, (text, points) in enumerate(items, 1))


def render_chunk(*, conversation: str, items: Sequence[tuple[str, int]], explanation: str = DEFAULT_EXPLANATION) -> str:
    """The prompt of one call: the template with the conversation block (grader_prompt.
    conversation_block) and the chunk's criteria. One pass, so text that happens to hold a
    placeholder is sent as written."""
    values = {
        "conversation": conversation,
        "rubric_items": criteria_block(items),
        "explanation": EXPLANATIONS[check_explanation(explanation)][0],
    }
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], RESPONSE_TEMPLATE)


def rendered_overhead(explanation: str = DEFAULT_EXPLANATION) -> int:
    """Characters of a chunk prompt besides the conversation block and the criteria lines."""
    return len(render_chunk(conversation="", items=[], explanation=explanation))


def shared_prefix_length(*, conversation_chars: int, explanation: str = DEFAULT_EXPLANATION) -> int:
    """Characters before the criteria: what the calls about one response have in common."""
    head = render_chunk(conversation="", items=[], explanation=explanation).split("\n# The rubric items\n")[0]
    return len(head) + conversation_chars


def line_overhead(position: int) -> int:
    """Characters a criterion line adds besides its rubric item: ``12. `` and the newline."""
    return len(f"{position + 1}. ") + 1


def chunk_messages(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


@dataclass(frozen=True)
class ChunkAnswer:
    """What one per-response answer says. `verdicts` maps ids (from 1) to answers;
    `fallback` lists, in order, the ids of the chunk that need a per-criterion call."""

    verdicts: Mapping[int, GraderAnswer]
    fallback: tuple[int, ...]
    unknown: int = 0  # entries whose id is no criterion of the chunk (ignored)
    entries: Mapping[int, str] | None = None  # each verdict's entry as JSON, stored as its raw output


def read_chunk_answer(text: str | None, n: int) -> ChunkAnswer:
    """The verdicts of an answer about a chunk of `n` criteria. The last object with a
    ``criteria`` list counts, as a model that corrects itself ends with its final answer.
    Raises MalformedAnswer when there is none."""
    found = [v for v in json_objects(text or "") if isinstance(v, dict) and isinstance(v.get("criteria"), list)]
    if not found:
        raise MalformedAnswer("the answer holds no JSON object with a criteria list")
    entries = [e for e in found[-1]["criteria"] if isinstance(e, dict)]
    ids = [e.get("id") for e in entries]
    # An id given twice is trusted for neither entry: the two may disagree.
    seen = Counter(i for i in ids if _is_id(i))
    verdicts: dict[int, GraderAnswer] = {}
    raw: dict[int, str] = {}
    unknown = 0
    for entry, entry_id in zip(entries, ids, strict=True):
        if not _is_id(entry_id) or not 1 <= entry_id <= n:
            unknown += 1
            continue
        met = entry.get("criteria_met")
        if seen[entry_id] != 1 or not isinstance(met, bool):
            continue
        explanation = entry.get("explanation", "")
        verdicts[entry_id] = GraderAnswer(
            met=met, explanation=explanation if isinstance(explanation, str) else json.dumps(explanation)
        )
        raw[entry_id] = json.dumps(entry, ensure_ascii=False)
    return ChunkAnswer(
        verdicts=verdicts,
        fallback=tuple(i for i in range(1, n + 1) if i not in verdicts),
        unknown=unknown,
        entries=raw,
    )


def _is_id(value: object) -> TypeGuard[int]:
    # JSON true is a Python int; an id must be a number.
    return isinstance(value, int) and not isinstance(value, bool)


def split_usage(total: int, parts: int) -> list[int]:
    """A call's token count shared among the grades it gave, summing to the total (the
    remainder on the first ones), so that a run's usage adds up to what the provider billed."""
    if parts <= 0:
        return []
    share, extra = divmod(total, parts)
    return [share + (1 if k < extra else 0) for k in range(parts)]
