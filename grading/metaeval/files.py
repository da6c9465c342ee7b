"""The public meta-eval file and our grader-label files: one JSON object per line.

Pure Python, no Django. A meta-eval row is one (completion, consensus criterion) item with the
labels of 1-4 anonymized physicians; a grader-label row is one grader decision on such an
item. A meta-eval row may come without ``prompt``, ``completion`` and ``rubric`` (third-party
reductions keep only ids and labels, plus ``item_id`` and ``dataset``): agreement needs no
text, so the importer takes those from what is stored or the consensus catalogue.

Parsing checks each line on its own, then what lines must agree on (one prompt per
prompt_id, one text per completion_id, one rubric per category, each item once). Errors
name the line and the field, as the HealthBench file import does.
"""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

# The message checks are the HealthBench file's own: meta-eval prompts are the same messages.
from annotation.formats.healthbench import RowError, RowInvalid, load_object, parse_messages
from annotation.formats.validation import (
    MAX_CLUSTER,
    MAX_COMPLETION_ID,
    MAX_PHYSICIAN_ID,
    MAX_PROMPT_ID,
    NO_ROWS,
    LineTooLong,
    numbered_lines,
    too_long,
)

META_EVAL_KEYS = (
    "anonymized_physician_ids",
    "binary_labels",
    "category",
    "completion",
    "completion_id",
    "prompt",
    "prompt_id",
    "rubric",
    "canary",
    "item_id",
    "dataset",
)
META_EVAL_REQUIRED = ("anonymized_physician_ids", "binary_labels", "category", "completion_id", "prompt_id")
GRADER_LABEL_KEYS = ("prompt_id", "completion_id", "category", "criteria_met", "explanation")
GRADER_LABEL_REQUIRED = GRADER_LABEL_KEYS[:-1]
# Physician ids are opaque: the public file's are 64 hex digits, other teams' are any names
# (up to MAX_PHYSICIAN_ID characters, the column's size).
MAX_ERRORS = 50


class FileInvalid(Exception):
    def __init__(self, errors: list[RowError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


@dataclass(frozen=True)
class MetaEvalRow:
    line: int
    prompt_id: str
    messages: list[dict[str, str]] | None  # None: a label-only row
    completion: str | None
    completion_id: str
    category: str
    rubric: str | None
    # (anonymized physician id, met), each physician once, in file order.
    labels: tuple[tuple[str, bool], ...]
    canary: str | None
    # Physicians listed twice with the same label: kept once, reported as a warning.
    repeated: tuple[str, ...] = ()

    @property
    def item(self) -> tuple[str, str, str]:
        return (self.prompt_id, self.completion_id, self.category)

    @property
    def missing(self) -> list[str]:
        """The text fields the row left out."""
        return [name for name, value in (("prompt", self.messages), ("completion", self.completion)) if value is None]


@dataclass(frozen=True)
class GraderLabelRow:
    line: int
    prompt_id: str
    completion_id: str
    category: str
    met: bool
    explanation: str

    @property
    def item(self) -> tuple[str, str, str]:
        return (self.prompt_id, self.completion_id, self.category)


@dataclass
class MetaEvalFile:
    rows: list[MetaEvalRow]
    warnings: list[str] = field(default_factory=list)


def _fail(line: int, field_name: str, message: str) -> RowInvalid:
    return RowInvalid(RowError(line, field_name, message))


def _name(line: int, data: dict, key: str, limit: int) -> str:
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise _fail(line, key, "must be a non-empty string")
    problem = too_long(value, limit)
    if problem:
        raise _fail(line, key, problem)
    return value


def _category(line: int, data: dict) -> str:
    category = _name(line, data, "category", MAX_CLUSTER)
    if not category.startswith("cluster:") or len(category) == len("cluster:"):
        raise _fail(line, "category", f"must be a consensus criterion's cluster tag (cluster:...), not {category!r}")
    return category


def _labels(line: int, data: dict) -> tuple[tuple[tuple[str, bool], ...], tuple[str, ...]]:
    labels, ids = data["binary_labels"], data["anonymized_physician_ids"]
    if not isinstance(labels, list):
        raise _fail(line, "binary_labels", f"must be a list of true/false, not {type(labels).__name__}")
    if not labels:
        raise _fail(line, "binary_labels", "is empty: an item needs at least one physician label")
    for i, label in enumerate(labels):
        # JSON 1/0 would pass a truth test; only true and false are labels.
        if not isinstance(label, bool):
            raise _fail(line, f"binary_labels[{i}]", f"must be true or false, not {json.dumps(label)}")
    if not isinstance(ids, list):
        raise _fail(line, "anonymized_physician_ids", f"must be a list of ids, not {type(ids).__name__}")
    if len(ids) != len(labels):
        raise _fail(
            line,
            "anonymized_physician_ids",
            f"has {len(ids)} entries but binary_labels has {len(labels)}: they are parallel lists",
        )
    first: dict[str, int] = {}
    out: list[tuple[str, bool]] = []
    repeated: list[str] = []
    for i, (pid, label) in enumerate(zip(ids, labels, strict=True)):
        if not isinstance(pid, str) or not pid.strip():
            raise _fail(line, f"anonymized_physician_ids[{i}]", f"{json.dumps(pid)} is not a non-empty string id")
        if too_long(pid, MAX_PHYSICIAN_ID):
            raise _fail(line, f"anonymized_physician_ids[{i}]", str(too_long(pid, MAX_PHYSICIAN_ID)))
        if pid in first:
            if labels[first[pid]] != label:
                raise _fail(
                    line,
                    f"binary_labels[{i}]",
                    f"physician {pid[:12]}… labels this item twice, {json.dumps(labels[first[pid]])} "
                    f"at [{first[pid]}] and {json.dumps(label)} here",
                )
            repeated.append(pid)
            continue
        first[pid] = i
        out.append((pid, label))
    return tuple(out), tuple(repeated)


def parse_meta_eval_line(line: int, raw: bytes | LineTooLong) -> MetaEvalRow:
    """Parse one line of a meta-eval file; raise RowInvalid naming the line and field."""
    data = load_object(line, raw, META_EVAL_KEYS, META_EVAL_REQUIRED, "a meta-eval row")
    prompt_id = _name(line, data, "prompt_id", MAX_PROMPT_ID)
    messages = parse_messages(line, data["prompt"]) if "prompt" in data else None
    completion = data.get("completion")
    if "completion" in data and not isinstance(completion, str):
        raise _fail(line, "completion", "must be a string")
    rubric = data.get("rubric")
    if "rubric" in data and (not isinstance(rubric, str) or not rubric.strip()):
        raise _fail(line, "rubric", "must be the non-empty text of the consensus criterion")
    for key in ("item_id", "dataset"):
        # Kept by third-party reductions; not stored, but they must be what they claim to be.
        if key in data and not isinstance(data[key], str):
            raise _fail(line, key, "must be a string")
    canary = data.get("canary")
    if "canary" in data and not isinstance(canary, str):
        raise _fail(line, "canary", "must be a string")
    labels, repeated = _labels(line, data)
    return MetaEvalRow(
        line=line,
        prompt_id=prompt_id,
        messages=messages,
        completion=completion,
        completion_id=_name(line, data, "completion_id", MAX_COMPLETION_ID),
        category=_category(line, data),
        rubric=rubric,
        labels=labels,
        canary=canary,
        repeated=repeated,
    )


def parse_grader_label_line(line: int, raw: bytes | LineTooLong) -> GraderLabelRow:
    data = load_object(line, raw, GRADER_LABEL_KEYS, GRADER_LABEL_REQUIRED, "a grader-label row")
    met = data["criteria_met"]
    if not isinstance(met, bool):
        raise _fail(line, "criteria_met", f"must be true or false, not {json.dumps(met)}")
    explanation = data.get("explanation", "")
    if not isinstance(explanation, str):
        raise _fail(line, "explanation", "must be a string")
    return GraderLabelRow(
        line=line,
        prompt_id=_name(line, data, "prompt_id", MAX_PROMPT_ID),
        completion_id=_name(line, data, "completion_id", MAX_COMPLETION_ID),
        category=_category(line, data),
        met=met,
        explanation=explanation,
    )


class _Errors(list[RowError]):
    """Errors of a whole file, stopping after MAX_ERRORS so a wrong file does not flood the terminal."""

    def add(self, error: RowError) -> bool:
        self.append(error)
        if len(self) >= MAX_ERRORS:
            self.append(RowError(error.line, "", f"stopped after {MAX_ERRORS} errors"))
            return False
        return True


def _numbered(lines: Iterable[bytes | LineTooLong]) -> Iterator[tuple[int, bytes | LineTooLong]]:
    """numbered_lines, then a whole-file error when there was no row at all."""
    empty = True
    for number, raw in numbered_lines(lines):
        empty = False
        yield number, raw
    if empty:
        raise FileInvalid([RowError(0, "", NO_ROWS)])


class _Agreement:
    """Remembers the first line that gave a key its value and reports a later line that differs."""

    def __init__(self, key_name: str, field_name: str):
        self.key_name, self.field_name = key_name, field_name
        self.first: dict[str, tuple[int, Any]] = {}

    def check(self, line: int, key: str, value: Any) -> RowError | None:
        seen = self.first.setdefault(key, (line, value))
        if seen[1] == value:
            return None
        return RowError(
            line, self.field_name, f"differs from line {seen[0]}, which has the same {self.key_name} {key!r}"
        )


def parse_meta_eval_lines(lines: Iterable[bytes | LineTooLong]) -> MetaEvalFile:
    """Parse a whole meta-eval file; raise FileInvalid listing every error (up to MAX_ERRORS)."""
    parsed = MetaEvalFile(rows=[])
    errors = _Errors()
    prompts, completions, rubrics = (
        _Agreement("prompt_id", "prompt"),
        _Agreement("completion_id", "completion"),
        _Agreement("category", "rubric"),
    )
    owners = _Agreement("completion_id", "prompt_id")
    items: dict[tuple[str, str, str], int] = {}
    for number, raw in _numbered(lines):
        try:
            row = parse_meta_eval_line(number, raw)
        except RowInvalid as exc:
            found = [exc.error]
        else:
            found = [
                e
                for e in (
                    prompts.check(number, row.prompt_id, row.messages) if row.messages is not None else None,
                    owners.check(number, row.completion_id, row.prompt_id),
                    completions.check(number, row.completion_id, row.completion)
                    if row.completion is not None
                    else None,
                    rubrics.check(number, row.category, row.rubric) if row.rubric is not None else None,
                )
                if e is not None
            ]
            if row.item in items:
                found.append(
                    RowError(
                        number,
                        "category",
                        f"this (completion_id, category) item already appears on line {items[row.item]}",
                    )
                )
            items.setdefault(row.item, number)
            if not found:
                parsed.rows.append(row)
                parsed.warnings.extend(
                    f"line {number}: physician {pid[:12]}… is listed twice with the same label; stored once "
                    "(the reference would count both pairs)"
                    for pid in row.repeated
                )
        if not all(errors.add(e) for e in found):
            break
    if errors:
        raise FileInvalid(list(errors))
    return parsed


def parse_grader_label_lines(lines: Iterable[bytes | LineTooLong]) -> list[GraderLabelRow]:
    """Parse a whole grader-label file; raise FileInvalid listing every error (up to MAX_ERRORS)."""
    rows: list[GraderLabelRow] = []
    errors = _Errors()
    items: dict[tuple[str, str, str], int] = {}
    for number, raw in _numbered(lines):
        try:
            row = parse_grader_label_line(number, raw)
        except RowInvalid as exc:
            error: RowError | None = exc.error
        else:
            error = None
            if row.item in items:
                error = RowError(
                    number,
                    "category",
                    f"this (prompt_id, completion_id, category) item already appears on line {items[row.item]}",
                )
            else:
                items[row.item] = number
                rows.append(row)
        if error is not None and not errors.add(error):
            break
    if errors:
        raise FileInvalid(list(errors))
    return rows
