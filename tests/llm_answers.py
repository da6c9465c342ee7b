"""What the test LLM server's models answer (tests.llm_server serves them): the grader's rule,
per criterion and per response (``need:WORD`` is met when WORD is in the response under
grading; ``entry:KIND`` faults in a per-response answer), and the policy model's replies
(``say:``, ``refuse:``, ``ramble:``)."""

from __future__ import annotations

import json
import re

from tests.llm_shapes import REFUSAL

NEED = re.compile(r"need:(\w+)")
SAY = re.compile(r"say:((?:\s*\w+)+)")
RAMBLE = "There is a great deal more to say about this, and I will go on saying it. " * 200


def grader_met(prompt: str) -> bool:
    """The rule: the criterion's ``need:WORD`` has WORD in the response under grading, i.e.
    after the last "assistant:" of the prompt (earlier turns do not count)."""
    needs = NEED.findall(prompt)
    if not needs:
        return False
    word = needs[-1]
    tail = prompt[max(0, prompt.rfind("assistant:")) :]
    return len(re.findall(rf"\b{re.escape(word)}\b", tail)) > tail.count(f"need:{word}")


GRADER_INTRO = "Here is my judgement."


def grader_reply(prompt: str, *, structured: bool = False, asked: int = 1) -> str:
    """The grader's answer to the `asked`-th ask of this prompt (see _wrapped)."""
    met = grader_met(prompt)
    answer = json.dumps({"explanation": "The response names it." if met else "It is not there.", "criteria_met": met})
    return answer if structured else _wrapped(answer, prompt, GRADER_INTRO, asked)


def between_sentences(answer: str, intro: str = GRADER_INTRO) -> str:
    """The answer with a sentence before and after it: read leniently, not as the reference reads it."""
    return f"{intro}\n{answer}\nI hope this helps."


def _wrapped(answer: str, prompt: str, intro: str, asked: int = 1) -> str:
    """The answer as a model without a schema may wrap it, varied by the prompt as real models
    vary; the lenient parser must take all of these: bare, in a json fence, or between
    sentences. Asked again about the same prompt (`asked` > 1), an answer first given between
    sentences comes bare: a model sampled afresh (the reference presets' temperature 0.5) keeps
    to the prompt's "a single JSON object and nothing else" the next time, which is what the
    reference's reading, asking again on any answer it cannot read, counts on. (Asked once
    per prompt, as a lenient reading asks, the answers are those of the first ask.)"""
    style = len(prompt) % 3
    if style == 0 or (style == 2 and asked > 1):
        return answer
    if style == 1:
        return f"```json\n{answer}\n```"
    return between_sentences(answer, intro)


CHUNK_HEADING = "\n# The rubric items\n"
CHUNK_ITEM = re.compile(r"^(\d+)\. (.*)$", re.MULTILINE)
ENTRY_FAULT = re.compile(r"entry:(missing|duplicate|non_boolean|unknown)")
EXPLANATIONS = {
    "a few words": ("Named.", "Not there."),
    "one short sentence": ("The reply names it plainly.", "The reply does not say it anywhere."),
    "two or three sentences": (
        "The reply names it plainly in its advice. That is what the criterion asks for.",
        "The reply does not say it anywhere. The criterion asks for it, so it is not met.",
    ),
}


def is_chunk_request(body: dict, prompt: str) -> bool:
    """A per-response request: its schema, or the answer format it asks for in words."""
    chat = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
    responses = ((body.get("text") or {}).get("format") or {}).get("name")
    return "rubric_grades" in (chat, responses) or ('{"criteria": [' in prompt and CHUNK_HEADING in prompt)


def chunk_reply(prompt: str, *, structured: bool = False, asked: int = 1) -> str:
    """Every numbered criterion judged by the per-criterion rule on the same response (so
    both modes give the same verdicts). A criterion with ``entry:KIND`` gets a faulty entry:
    left out (missing), given twice with opposite verdicts (duplicate), "yes" for its
    verdict (non_boolean), or joined by an entry of an id the chunk does not have (unknown)."""
    head, _, items = prompt.rpartition(CHUNK_HEADING)
    long, short = next(
        (v for k, v in EXPLANATIONS.items() if f"Each explanation is {k}" in head), EXPLANATIONS["one short sentence"]
    )
    numbered = CHUNK_ITEM.findall(items)
    entries: list[dict] = []
    for number, item in numbered:
        met = grader_met(f"{head}\n{item}")
        entry = {"id": int(number), "explanation": long if met else short, "criteria_met": met}
        fault = ENTRY_FAULT.search(item)
        kind = fault.group(1) if fault else ""
        if kind == "missing":
            continue
        if kind == "non_boolean":
            entry["criteria_met"] = "yes"
        entries.append(entry)
        if kind == "duplicate":
            entries.append({**entry, "criteria_met": not met})
        if kind == "unknown":
            entries.append({**entry, "id": len(numbered) + 1})
    answer = json.dumps({"criteria": entries})
    return answer if structured else _wrapped(answer, prompt, "Here are my judgements.", asked)


def policy_reply(messages: list[dict]) -> tuple[str, str | None]:
    """(text, refusal) of the policy model, as the last user turn directs."""
    last = str(next((m for m in reversed(messages) if m.get("role") == "user"), {"content": ""}).get("content", ""))
    if "refuse:" in last:
        return "", REFUSAL
    if "ramble:" in last:
        return RAMBLE, None
    words = SAY.search(last)
    return (f"Reply: {words.group(1).strip()}." if words else "Reply: nothing to say."), None
