"""HealthBench Professional rows: one JSON object per line, in the shape of its dataset card.

Pure Python, no Django. A Professional row carries `conversation` (the messages, ending with a
user turn; either the list itself or an object `{"messages": [...]}`), `rubric_items` (each
with `criterion_text` and `points`), `use_case`, `type`, `difficulty`, `specialty` and
`physician_response`, and optionally `id` and `canary_string`. It is told apart from a
HealthBench row by its content (`conversation` and `rubric_items` instead of `prompt` and
`rubrics`), never by the file's name.

A row becomes a `HealthBenchRow` like any other, so storing, merging and grading need nothing
new: its criteria have no tags, and its example tags are derived from its labels
(`use_case:consult`, `type:good_faith`, `difficulty:...`, `specialty:...`), so that a run's
report scores each group the way it scores `theme:` tags. What the product does not compute
(the labels verbatim, the physician's response, `id`, `canary_string` and the order of every
key) is kept in `HealthBenchRow.professional` and written back by `format_professional_row`:
export(import(line)) == line for a line in Python's `json.dumps` default style.
"""

import hashlib
import json
from typing import Any

from annotation.formats.healthbench import (
    HealthBenchRow,
    RubricItem,
    fail,
    is_whole_number,
    parse_decoded,
    parse_messages,
    parse_row,
)
from annotation.formats.validation import MAX_PROMPT_ID, LineTooLong, too_long

LABELS = ("use_case", "type", "difficulty", "specialty")
REQUIRED_KEYS = ("conversation", "rubric_items", *LABELS, "physician_response")
ROW_KEYS = ("id", *REQUIRED_KEYS, "canary_string")
ITEM_KEYS = ("criterion_text", "points")
# A row without an `id` is named by its conversation, so that importing it again merges.
DERIVED_ID_PREFIX = "professional-"


def is_professional(data: dict[str, Any]) -> bool:
    """Whether a decoded line is a Professional row (by its keys; a HealthBench row has none of these)."""
    return "rubric_items" in data or "conversation" in data


def parse_any_line(line: int, raw: bytes | LineTooLong) -> HealthBenchRow:
    """Parse one line of a HealthBench or a HealthBench Professional file (told apart by its keys)."""
    return parse_decoded(line, raw, _parse_decoded_row)


def _parse_decoded_row(line: int, data: dict[str, Any]) -> HealthBenchRow:
    if is_professional(data):
        return parse_professional(line, data)
    return parse_row(line, data)


def _key_orders(objects: list[dict[str, Any]]) -> str | list[str]:
    # The order of the keys of each message or rubric item, to write them back as they came:
    # one string when all agree (the usual case), else one per object.
    orders = [",".join(o) for o in objects]
    return orders[0] if len(set(orders)) == 1 else orders


def _conversation(line: int, value: Any) -> tuple[list[dict[str, str]], str, Any]:
    """(messages, shape, the raw messages) of the `conversation` field."""
    if isinstance(value, dict):
        extra = sorted(set(value) - {"messages"})
        if extra:
            raise fail(line, f"conversation.{extra[0]}", "is not a field of a conversation (only messages)")
        if "messages" not in value:
            raise fail(line, "conversation.messages", "is missing")
        return parse_messages(line, value["messages"], "conversation.messages"), "object", value["messages"]
    return parse_messages(line, value, "conversation"), "list", value


def _rubric_item(line: int, i: int, value: Any) -> RubricItem:
    where = f"rubric_items[{i}]"
    if not isinstance(value, dict):
        raise fail(line, where, "must be an object with criterion_text and points")
    for key in ITEM_KEYS:
        if key not in value:
            raise fail(line, f"{where}.{key}", "is missing")
    extra = sorted(set(value) - set(ITEM_KEYS))
    if extra:
        raise fail(line, f"{where}.{extra[0]}", "is not a field of a rubric item (only criterion_text, points)")
    text, points = value["criterion_text"], value["points"]
    if not isinstance(text, str) or not text.strip():
        raise fail(line, f"{where}.criterion_text", "must be a non-empty string")
    if not is_whole_number(points):
        raise fail(line, f"{where}.points", f"must be a whole number from -10 to 10, not {json.dumps(points)}")
    if not -10 <= points <= 10 or points == 0:
        raise fail(line, f"{where}.points", f"{points} is outside -10..10 or 0: a criterion rewards or penalises")
    return RubricItem(criterion=text, points=points, tags=())


def _prompt_id(line: int, data: dict[str, Any]) -> str:
    if "id" not in data:
        digest = hashlib.sha256(json.dumps(data["conversation"], sort_keys=True).encode()).hexdigest()
        return DERIVED_ID_PREFIX + digest[:32]
    value = data["id"]
    if is_whole_number(value):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise fail(line, "id", "must be a non-empty string or a whole number")
    problem = too_long(value, MAX_PROMPT_ID)
    if problem:
        raise fail(line, "id", problem)
    return value


def parse_professional(line: int, data: dict[str, Any]) -> HealthBenchRow:
    """A decoded Professional row as a HealthBenchRow; raise RowInvalid naming the line and field."""
    for key in REQUIRED_KEYS:
        if key not in data:
            raise fail(line, key, "is missing (a HealthBench Professional row)")
    extra = sorted(set(data) - set(ROW_KEYS))
    if extra:
        raise fail(line, extra[0], f"is not a field of a HealthBench Professional row (expected {', '.join(ROW_KEYS)})")
    messages, shape, raw_messages = _conversation(line, data["conversation"])
    tags = []
    for label in LABELS:
        value = data[label]
        if value is not None and not isinstance(value, str):
            raise fail(line, label, f"must be a string or null, not {json.dumps(value)}")
        if value:
            tags.append(f"{label}:{value}")
    if not isinstance(data["physician_response"], str | None):
        raise fail(line, "physician_response", "must be a string or null")
    canary = data.get("canary_string")
    if "canary_string" in data and not isinstance(canary, str):
        raise fail(line, "canary_string", "must be a string")
    if not isinstance(data["rubric_items"], list):
        raise fail(line, "rubric_items", "must be a list of rubric items")
    if not data["rubric_items"]:
        raise fail(line, "rubric_items", "is empty: a conversation needs at least one criterion to be graded")
    rubrics = [_rubric_item(line, i, item) for i, item in enumerate(data["rubric_items"])]
    professional = {
        "keys": list(data),
        "conversation": shape,
        "message_keys": _key_orders(raw_messages),
        "item_keys": _key_orders(data["rubric_items"]),
        "fields": {k: v for k, v in data.items() if k not in ("conversation", "rubric_items", "canary_string")},
    }
    return HealthBenchRow(
        line=line,
        prompt_id=_prompt_id(line, data),
        messages=messages,
        example_tags=tags,
        rubrics=rubrics,
        ideal=None,
        canary=canary,
        professional=professional,
    )


def _ordered(value: dict[str, Any], orders: str | list[str], i: int) -> dict[str, Any]:
    # An item added after the import (in the rubric editor) has no recorded order: the card's.
    if isinstance(orders, list) and i >= len(orders):
        return value
    keys = (orders if isinstance(orders, str) else orders[i]).split(",")
    return {k: value[k] for k in keys}


def format_professional_row(
    *, messages: list[dict[str, str]], rubrics: list[RubricItem], canary: str | None, professional: dict[str, Any]
) -> str:
    """One line of a Professional file, with the keys and values the imported line had."""
    items = [
        _ordered({"criterion_text": r.criterion, "points": r.points}, professional["item_keys"], i)
        for i, r in enumerate(rubrics)
    ]
    conversation = [_ordered(m, professional["message_keys"], i) for i, m in enumerate(messages)]
    row: dict[str, Any] = {}
    for key in professional["keys"]:
        if key == "conversation":
            row[key] = {"messages": conversation} if professional["conversation"] == "object" else conversation
        elif key == "rubric_items":
            row[key] = items
        elif key == "canary_string":
            row[key] = canary
        else:
            row[key] = professional["fields"][key]
    return json.dumps(row)
