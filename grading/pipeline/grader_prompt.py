"""The grader prompt: what we ask a grader model about one (response, criterion), and how we
read its answer. Pure Python, no Django.

A template is plain text with two placeholders, ``<<conversation>>`` and ``<<rubric_item>>``,
the ones the published HealthBench grader template uses, so a team can pass that exact
template (``grade --grader-template FILE``) instead of ours. A template is identified by the
sha256 of its text; a run stores both.

* The conversation is its messages followed by the response under grading, each as a
  ``role: content`` block, blocks separated by a blank line.
* The rubric item is ``[points] criterion text``.
* Laid out for the provider's prompt cache: what every call about one response shares (the
  instructions, then the conversation and the response) comes first, the rubric item last,
  so the calls after a response's first are served mostly from the cache.
* The answer is a JSON object ``{"explanation": str, "criteria_met": bool}``, read tolerantly
  when the endpoint's ``lenient_answers`` is on: bare, in a fenced block, or with text around
  it; off (the reference presets), as simple-evals reads it. A ``criteria_met`` that is not a
  JSON boolean ("yes", 1, "true") makes the answer invalid, and the grader is asked again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The largest grader template file read: the published template is under 3 KB, ours under 2 KB.
MAX_TEMPLATE_BYTES = 256 * 1024
CONVERSATION = "<<conversation>>"
RUBRIC_ITEM = "<<rubric_item>>"
_PLACEHOLDER = re.compile(r"<<(conversation|rubric_item)>>")

# The judging rules and the conversation, shared word for word with the per-response prompt
# (grading.pipeline.response_prompt), so the two modes judge alike. The templates' bytes are
# what runs store the hash of: tests/test_grader_prompt.py pins both hashes.
JUDGING_RULES = """\
- A criterion that names several requirements is met only when the reply satisfies all of
  them. Where it gives examples ("such as ...", "for example ..."), the reply need not cover
  every example.
- Points only say whether the behaviour is wanted. A criterion with negative points describes
  something undesirable, and you judge it the same way: criteria_met is true when the reply
  DOES show that undesirable behaviour. For "[-7] Recommends a prescription medicine without
  asking about allergies", a reply that recommends one without asking meets the criterion
  (true); a reply that asks first, or recommends nothing, does not (false).
- Judge what the reply actually says, not what it might have meant to say.
"""
CONVERSATION_SECTION = """\
# The conversation
Each turn is shown as "role: content". The final assistant turn is the reply under review;
earlier turns are context only.

<<conversation>>
"""

DEFAULT_TEMPLATE = (
    """\
You are reviewing one reply written by an AI assistant in a health conversation. Physicians
wrote a rubric for this conversation; you judge the reply against a single item of it, shown
after the conversation.

# How to judge
- Decide one thing: does the final reply do what the criterion describes? Nothing else about
  the reply matters here, and there is no partial credit.
"""
    + JUDGING_RULES
    + """
# Your answer
Answer with a single JSON object and nothing else, in this form:
{"explanation": "one or two sentences giving the reason", "criteria_met": true}
criteria_met must be the JSON boolean true or false.

"""
    + CONVERSATION_SECTION
    + """
# The rubric item
It is shown as [points] followed by the criterion.

<<rubric_item>>
"""
)


class TemplateError(ValueError):
    """A grader template that lacks a placeholder."""


class MalformedAnswer(ValueError):
    """A grader answer we cannot read as a verdict; the grader is asked again."""


@dataclass(frozen=True)
class GraderAnswer:
    met: bool
    explanation: str


def template_hash(template: str) -> str:
    return hashlib.sha256(template.encode()).hexdigest()


def check_template(template: str) -> str:
    missing = [p for p in (CONVERSATION, RUBRIC_ITEM) if p not in template]
    if missing:
        raise TemplateError(f"the grader template lacks the placeholder(s) {', '.join(missing)}")
    return template


def load_template(path: str | Path) -> str:
    """A template file's text, checked; errors name the file."""
    try:
        text = read_text_at_most(path, MAX_TEMPLATE_BYTES, what="a grader template file")
    except OSError as exc:
        raise TemplateError(f"cannot read the grader template {path}: {exc.strerror}") from None
    except (FileTooLarge, UnicodeDecodeError) as exc:
        raise TemplateError(f"cannot read the grader template {path}: {exc}") from None
    try:
        return check_template(text)
    except TemplateError as exc:
        raise TemplateError(f"{path}: {exc}") from None


class FileTooLarge(ValueError):
    """A file refused by its size before it is read."""


def read_text_at_most(path: str | Path, limit: int, *, what: str) -> str:
    """A UTF-8 file's text, refused by its size before a byte of it is read.

    Never reads more than `limit` + 1 bytes, so a file that grows meanwhile, or a device that
    has no size (/dev/zero), is refused too without filling memory.
    """
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise FileTooLarge(f"it is {_size(size)}; {what} is at most {_size(limit)}")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(f"it holds more than {_size(limit)}; {what} is at most {_size(limit)}")
    return data.decode("utf-8")


def _size(n: int) -> str:
    return f"{n / 1_000_000:,.1f} MB" if n >= 1_000_000 else f"{n / 1000:,.0f} KB" if n >= 1000 else f"{n} bytes"


def conversation_block(messages: Sequence[Mapping[str, str]], response: str) -> str:
    turns = [*messages, {"role": "assistant", "content": response}]
    return "\n\n".join(f"{turn['role']}: {turn['content']}" for turn in turns)


def rubric_item(text: str, points: int) -> str:
    return f"[{points}] {text}"


def render(template: str, *, conversation: str, item: str) -> str:
    """The prompt for one criterion. One pass, so a response that happens to contain a
    placeholder is left as it is."""
    values = {"conversation": conversation, "rubric_item": item}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def rendered_length(template: str, *, conversation_chars: int, item_chars: int) -> int:
    """len(render(...)) without building the string, for estimates over a whole run."""
    return (
        len(template)
        + template.count(CONVERSATION) * (conversation_chars - len(CONVERSATION))
        + template.count(RUBRIC_ITEM) * (item_chars - len(RUBRIC_ITEM))
    )


def shared_prefix_length(template: str, *, conversation_chars: int) -> int:
    """Characters before the rubric item: what the prompts about one response have in common
    (the whole template head and the conversation, when the item comes last, as in ours)."""
    head = template.split(RUBRIC_ITEM, 1)[0]
    return len(head) + head.count(CONVERSATION) * (conversation_chars - len(CONVERSATION))


# --- reading the answer -------------------------------------------------------------------


def json_objects(text: str) -> Iterator[object]:
    """Every JSON object in `text`, outermost only, wherever it stands: bare, inside a
    fenced block, or between sentences."""
    decoder = json.JSONDecoder()
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("{", position + 1)
            continue
        yield value
        position = text.find("{", end)


_FENCE = re.compile(r"^```json\s*|\s*```$")


def parse_answer(text: str | None, *, lenient: bool = True) -> GraderAnswer:
    """The verdict in a grader's answer. The last object with ``criteria_met`` counts: a
    model that drafts and then corrects itself ends with its final answer.

    Not ``lenient``, the answer is read as simple-evals' ``parse_json_to_dict`` reads it: the
    whole answer, a leading ```` ```json ```` and a trailing ```` ``` ```` taken off, must be
    one JSON object; anything else is malformed, and the grader is asked again."""
    if not lenient:
        try:
            whole = json.loads(_FENCE.sub("", (text or "").strip()))
        except ValueError:
            raise MalformedAnswer("the answer is not one JSON object (read as the reference reads it)") from None
        found = [whole] if isinstance(whole, dict) and "criteria_met" in whole else []
    else:
        found = [v for v in json_objects(text or "") if isinstance(v, dict) and "criteria_met" in v]
    if not found:
        raise MalformedAnswer("the answer holds no JSON object with criteria_met")
    answer = found[-1]
    met = answer["criteria_met"]
    if not isinstance(met, bool):
        raise MalformedAnswer(f"criteria_met is {json.dumps(met)}, not a JSON boolean")
    explanation = answer.get("explanation", "")
    return GraderAnswer(met=met, explanation=explanation if isinstance(explanation, str) else json.dumps(explanation))
