"""The public HealthBench eval file format: one JSON object per line.

Pure Python, no Django: parsing and validating a line into a `HealthBenchRow`, and writing a
row back out exactly as the public files do (Python `json.dumps` default style, keys in the
public order), so that export(import(line)) == line.
"""

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from annotation.formats.validation import (
    MAX_CLUSTER,
    MAX_IDEAL_GROUP,
    MAX_PROMPT_ID,
    MAX_THEME,
    JsonProblem,
    LineTooLong,
    decode_json,
    decode_json_then,
    too_long,
)

ROW_KEYS = ("example_tags", "ideal_completions_data", "prompt", "prompt_id", "rubrics", "canary")
REQUIRED_KEYS = ("example_tags", "ideal_completions_data", "prompt", "prompt_id", "rubrics")
IDEAL_KEYS = ("ideal_completion", "ideal_completions_group", "ideal_completions_ref_completions")
ROLES = ("system", "user", "assistant")
T = TypeVar("T")
AXES = ("completeness", "accuracy", "context_awareness", "communication_quality", "instruction_following")


@dataclass(frozen=True)
class RowError:
    line: int  # 0: the file as a whole (e.g. it has no rows)
    field: str
    message: str

    def __str__(self) -> str:
        if not self.line:
            return self.message
        where = f"line {self.line}" + (f", field {self.field}" if self.field else "")
        return f"{where}: {self.message}"


class RowInvalid(Exception):
    def __init__(self, error: RowError):
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class RubricItem:
    criterion: str
    points: int
    tags: tuple[str, ...]

    @property
    def level(self) -> str:
        return _tag_info(self.tags).level

    @property
    def axis(self) -> str:
        return _tag_info(self.tags).axis

    @property
    def cluster(self) -> str | None:
        """The full `cluster:...` tag of a consensus criterion, else None."""
        return _tag_info(self.tags).cluster

    def key(self) -> tuple[str, int, tuple[str, ...]]:
        return (self.criterion, self.points, self.tags)


@dataclass(frozen=True)
class TagInfo:
    level: str
    axis: str
    cluster: str | None
    problem: str | None


@functools.lru_cache(maxsize=4096)
def _tag_info(tags: tuple[str, ...]) -> TagInfo:
    # A file holds only a few dozen distinct tag lists: check and read each once.
    levels = [t for t in tags if t.startswith("level:")]
    axes = [t for t in tags if t.startswith("axis:")]
    clusters = [t for t in tags if t.startswith("cluster:")]
    problem = None
    if len(set(tags)) != len(tags):
        problem = f"tag {next(t for t in tags if tags.count(t) > 1)!r} appears twice"
    elif levels not in (["level:example"], ["level:cluster"]):
        problem = "needs exactly one level tag, level:example or level:cluster"
    elif len(axes) != 1 or axes[0][5:] not in AXES:
        problem = f"needs exactly one axis tag, one of {', '.join('axis:' + a for a in AXES)}"
    elif levels == ["level:cluster"] and len(clusters) != 1:
        problem = "a level:cluster criterion needs exactly one cluster: tag"
    elif levels == ["level:example"] and clusters:
        problem = "a level:example criterion cannot carry a cluster: tag"
    elif clusters and too_long(clusters[0], MAX_CLUSTER):
        problem = f"the cluster: tag {too_long(clusters[0], MAX_CLUSTER)}"
    return TagInfo(
        level=levels[0][6:] if levels else "",
        axis=axes[0][5:] if axes else "",
        cluster=clusters[0] if clusters else None,
        problem=problem,
    )


@dataclass(frozen=True)
class IdealData:
    completion: str
    group: str
    ref_completions: tuple[str, ...]


@dataclass
class HealthBenchRow:
    line: int
    prompt_id: str
    messages: list[dict[str, str]]
    example_tags: list[str]
    rubrics: list[RubricItem]
    ideal: IdealData | None
    canary: str | None
    theme: str = field(default="")
    # A HealthBench Professional row's own fields and key order (annotation.formats.professional).
    professional: dict[str, Any] | None = None


def fail(line: int, field_name: str, message: str) -> RowInvalid:
    return RowInvalid(RowError(line, field_name, message))


def is_whole_number(value: Any) -> bool:
    # JSON true/false arrive as bool, which is an int subclass in Python.
    return isinstance(value, int) and not isinstance(value, bool)


def _string_list(line: int, name: str, value: Any, *, unique: bool) -> list[str]:
    if not isinstance(value, list):
        raise fail(line, name, f"must be a list of strings, not {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise fail(line, f"{name}[{i}]", f"must be a string, not {json.dumps(item)}")
    if unique and len(set(value)) != len(value):
        duplicate = next(t for t in value if value.count(t) > 1)
        raise fail(line, name, f"tag {duplicate!r} appears twice")
    return value


def parse_messages(line: int, value: Any, name: str = "prompt") -> list[dict[str, str]]:
    if not isinstance(value, list):
        raise fail(line, name, f"must be a list of messages, not {type(value).__name__}")
    if not value:
        raise fail(line, name, "the conversation is empty: it needs at least one user turn")
    messages = []
    for i, message in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(message, dict):
            raise fail(line, where, "must be an object with role and content")
        for key in ("role", "content"):
            if key not in message:
                raise fail(line, f"{where}.{key}", "is missing")
        extra = sorted(set(message) - {"role", "content"})
        if extra:
            raise fail(line, f"{where}.{extra[0]}", "is not a field of a message (only role and content)")
        if message["role"] not in ROLES:
            raise fail(line, f"{where}.role", f"unknown role {message['role']!r}: use one of {', '.join(ROLES)}")
        if not isinstance(message["content"], str):
            raise fail(line, f"{where}.content", "must be a string")
        messages.append({"content": message["content"], "role": message["role"]})
    if messages[-1]["role"] != "user":
        raise fail(
            line,
            f"{name}[{len(messages) - 1}].role",
            f"the conversation must end with a user turn, not {messages[-1]['role']}",
        )
    return messages


_ITEM_KEYS = {"criterion", "points", "tags"}


@functools.lru_cache(maxsize=4096)
def _string_tag_info(tags: tuple[Any, ...]) -> TagInfo | None:
    # None when a tag is not a string: the checked path then names it.
    return _tag_info(tags) if all(type(t) is str for t in tags) else None


def _parse_rubric_item(line: int, i: int, value: Any) -> RubricItem:
    # A file has ~60,000 items, nearly all valid: one pass of cheap checks takes them, and
    # anything else goes through the checks that name what is wrong.
    if type(value) is dict and value.keys() == _ITEM_KEYS:
        text, points, tags = value["criterion"], value["points"], value["tags"]
        if type(text) is str and type(points) is int and type(tags) is list and points and -10 <= points <= 10:
            try:
                info = _string_tag_info(tuple(tags))
            except TypeError:  # a tag that is a list or an object
                info = None
            if info is not None and info.problem is None and text.strip():
                return RubricItem(criterion=text, points=points, tags=tuple(tags))
    return _checked_rubric_item(line, i, value)


def _checked_rubric_item(line: int, i: int, value: Any) -> RubricItem:
    where = f"rubrics[{i}]"
    if not isinstance(value, dict):
        raise fail(line, where, "must be an object with criterion, points and tags")
    for key in ("criterion", "points", "tags"):
        if key not in value:
            raise fail(line, f"{where}.{key}", "is missing")
    extra = sorted(set(value) - {"criterion", "points", "tags"})
    if extra:
        raise fail(line, f"{where}.{extra[0]}", "is not a field of a rubric item (only criterion, points, tags)")
    text = value["criterion"]
    if not isinstance(text, str) or not text.strip():
        raise fail(line, f"{where}.criterion", "must be a non-empty string")
    points = value["points"]
    if not is_whole_number(points):
        raise fail(line, f"{where}.points", f"must be a whole number from -10 to 10, not {json.dumps(points)}")
    if not -10 <= points <= 10:
        raise fail(line, f"{where}.points", f"{points} is outside -10..10")
    if points == 0:
        raise fail(line, f"{where}.points", "0 points is not allowed: a criterion rewards or penalises")
    tags = tuple(_string_list(line, f"{where}.tags", value["tags"], unique=False))
    problem = _tag_info(tags).problem
    if problem:
        raise fail(line, f"{where}.tags", problem)
    return RubricItem(criterion=text, points=points, tags=tags)


def _parse_ideal(line: int, value: Any) -> IdealData | None:
    if value is None:
        return None
    name = "ideal_completions_data"
    if not isinstance(value, dict):
        raise fail(line, name, "must be null or an object")
    for key in IDEAL_KEYS:
        if key not in value:
            raise fail(line, f"{name}.{key}", "is missing")
    extra = sorted(set(value) - set(IDEAL_KEYS))
    if extra:
        raise fail(line, f"{name}.{extra[0]}", "is not a field of ideal_completions_data")
    if not isinstance(value["ideal_completion"], str):
        raise fail(line, f"{name}.ideal_completion", "must be a string")
    if not isinstance(value["ideal_completions_group"], str):
        raise fail(line, f"{name}.ideal_completions_group", "must be a string")
    problem = too_long(value["ideal_completions_group"], MAX_IDEAL_GROUP)
    if problem:
        raise fail(line, f"{name}.ideal_completions_group", problem)
    refs = _string_list(
        line, f"{name}.ideal_completions_ref_completions", value["ideal_completions_ref_completions"], unique=False
    )
    return IdealData(value["ideal_completion"], value["ideal_completions_group"], tuple(refs))


def load_object(
    line: int, raw: bytes | LineTooLong, keys: tuple[str, ...], required: tuple[str, ...], what: str
) -> dict[str, Any]:
    """Decode one JSONL line into an object with only the given keys, or raise RowInvalid."""
    data = decode_line(line, raw)
    check_keys(line, data, keys, required, what)
    return data


def decode_line(line: int, raw: bytes | LineTooLong) -> dict[str, Any]:
    """Decode one JSONL line into an object, or raise RowInvalid."""
    return _parse_text(line, raw, lambda _, data: data, quick=False)


def parse_decoded(line: int, raw: bytes | LineTooLong, parse: Callable[[int, dict[str, Any]], T]) -> T:
    """`parse(line, decode_line(line, raw))`, refusing exactly what that refuses.

    `parse` must take only rows of known shapes, a few levels deep (it refuses anything
    nested deeper than MAX_DEPTH), so a line it takes is not walked again for its depth
    (validation.decode_json_then).
    """
    return _parse_text(line, raw, parse, quick=True)


def _parse_text(line: int, raw: bytes | LineTooLong, parse: Callable[[int, dict[str, Any]], T], *, quick: bool) -> T:
    if isinstance(raw, LineTooLong):
        raise fail(line, "", raw.message)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(line, "", f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})") from None

    def check(data: Any) -> T:
        if not isinstance(data, dict):
            raise fail(line, "", "must be a JSON object")
        return parse(line, data)

    try:
        return decode_json_then(text, check) if quick else check(decode_json(text))
    except json.JSONDecodeError as exc:
        raise fail(line, "", f"is not valid JSON: {exc.msg} at column {exc.colno} (truncated line?)") from None
    except JsonProblem as exc:
        raise fail(line, exc.field, exc.message) from None


def check_keys(line: int, data: dict[str, Any], keys: tuple[str, ...], required: tuple[str, ...], what: str) -> None:
    """Raise RowInvalid for a required key missing or a key that is not one of `keys`."""
    for key in required:
        if key not in data:
            raise fail(line, key, "is missing")
    extra = sorted(set(data) - set(keys))
    if extra:
        raise fail(line, extra[0], f"is not a field of {what} (expected {', '.join(keys)})")


def parse_line(line: int, raw: bytes | LineTooLong) -> HealthBenchRow:
    """Parse one line of a HealthBench file; raise RowInvalid naming the line and field."""
    return parse_decoded(line, raw, parse_row)


def parse_row(line: int, data: dict[str, Any]) -> HealthBenchRow:
    """A decoded HealthBench row, checked; raise RowInvalid naming the line and field."""
    check_keys(line, data, ROW_KEYS, REQUIRED_KEYS, "a HealthBench row")
    prompt_id = data["prompt_id"]
    if not isinstance(prompt_id, str) or not prompt_id.strip():
        raise fail(line, "prompt_id", "must be a non-empty string")
    problem = too_long(prompt_id, MAX_PROMPT_ID)
    if problem:
        raise fail(line, "prompt_id", problem)
    messages = parse_messages(line, data["prompt"])
    example_tags = _string_list(line, "example_tags", data["example_tags"], unique=True)
    themes = [t for t in example_tags if t.startswith("theme:")]
    if len(themes) > 1:
        raise fail(line, "example_tags", f"has {len(themes)} theme: tags; a conversation has one theme")
    theme = themes[0][len("theme:") :] if themes else ""
    if too_long(theme, MAX_THEME):
        where = f"example_tags[{example_tags.index(themes[0])}]"
        raise fail(line, where, f"the theme name {too_long(theme, MAX_THEME)}")
    if not isinstance(data["rubrics"], list):
        raise fail(line, "rubrics", "must be a list of rubric items")
    if not data["rubrics"]:
        raise fail(line, "rubrics", "is empty: a conversation needs at least one criterion to be graded")
    rubrics = [_parse_rubric_item(line, i, item) for i, item in enumerate(data["rubrics"])]
    canary = data.get("canary")
    if "canary" in data and not isinstance(canary, str):
        raise fail(line, "canary", "must be a string")
    return HealthBenchRow(
        line=line,
        prompt_id=prompt_id,
        messages=messages,
        example_tags=example_tags,
        rubrics=rubrics,
        ideal=_parse_ideal(line, data["ideal_completions_data"]),
        canary=canary,
        theme=theme,
    )


def ideal_to_json(ideal: IdealData | None) -> dict | None:
    if ideal is None:
        return None
    return {
        "ideal_completion": ideal.completion,
        "ideal_completions_group": ideal.group,
        "ideal_completions_ref_completions": list(ideal.ref_completions),
    }


def format_row(
    *,
    prompt_id: str,
    messages: list[dict[str, str]],
    example_tags: list[str],
    rubrics: list[RubricItem],
    ideal: IdealData | None,
    canary: str | None,
) -> str:
    """One line of a HealthBench file, byte-compatible with the public files."""
    row: dict[str, Any] = {
        "example_tags": list(example_tags),
        "ideal_completions_data": ideal_to_json(ideal),
        "prompt": [{"content": m["content"], "role": m["role"]} for m in messages],
        "prompt_id": prompt_id,
        "rubrics": [{"criterion": r.criterion, "points": r.points, "tags": list(r.tags)} for r in rubrics],
    }
    if canary is not None:
        row["canary"] = canary
    return json.dumps(row)
