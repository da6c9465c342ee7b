"""The results file simple-evals writes for a HealthBench run (``*_allresults.json``).

Pure Python, no Django. The file is one JSON object::

    {"score": ..., "metrics": {...}, "htmls": [...], "convos": [...],
     "metadata": {"example_level_metadata": [example, ...]}}

and each example holds ``prompt_id``, ``completion_id``, ``prompt``, ``completion`` (one
assistant message), ``rubric_items`` (``criterion``, ``points``, ``tags``, ``criteria_met``,
``explanation``), ``score`` and ``usage``. Only the examples are read: scores are
recomputed from the grades, and ``htmls``/``convos`` repeat what the examples hold.

``criteria_met`` is true or false for a grade, and null for a grade that failed (our own
tools write null; the reference retries until it gets a boolean). Anything else is an error
naming the example, its prompt_id and the field.

:func:`results_document` and :func:`dump_results` write such a file (``export_run``). Beside
the reference's keys, a length-adjusted run writes each example's ``length_adjusted_score``
and ``metadata.length_adjustment`` (its constants), which reference tools ignore and
``import_run`` reads back.
"""

import json
import mmap
import re
from dataclasses import dataclass
from typing import Any

from annotation.formats.validation import (
    MAX_COMPLETION_ID,
    MAX_PROMPT_ID,
    MAX_SMALLINT,
    MAX_TOKENS,
    MIN_SMALLINT,
    NO_ROWS,
    FileRefused,
    JsonProblem,
    decode_json,
    too_long,
)

MAX_ERRORS = 50
# simple-evals writes the file with json.dumps(indent=2): its top-level keys, and only
# those, start a line with exactly two spaces (string values cannot hold a raw newline).
_METADATA_KEY = b'\n  "metadata": '


@dataclass(frozen=True)
class ExampleError:
    index: int | None  # 0-based position in example_level_metadata; None for the whole file
    prompt_id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        if self.index is None:
            where = "file"
        else:
            where = f"example {self.index}"
            if self.prompt_id is not None:
                where += f" (prompt_id {self.prompt_id!r})"
        if self.field:
            where += f", field {self.field}"
        return f"{where}: {self.message}"


class ResultsInvalid(FileRefused):
    errors: list[ExampleError]


@dataclass(frozen=True)
class GradedItem:
    criterion: str
    points: int
    tags: tuple[str, ...]
    met: bool | None  # None: the grade failed
    explanation: str

    def key(self) -> tuple[str, int, tuple[str, ...]]:
        return (self.criterion, self.points, self.tags)


@dataclass(frozen=True)
class LengthAdjustment:
    centre: int
    penalty_per_500: float


@dataclass(frozen=True)
class ResultExample:
    index: int
    prompt_id: str
    completion_id: str
    completion: str
    items: tuple[GradedItem, ...]
    input_tokens: int | None
    output_tokens: int | None
    # What export_run writes back unchanged: the example's keys in the file's order, and the
    # value of every key the product does not compute (prompt, usage, any other field).
    kept: dict[str, Any] | None = None


# The example fields the product computes from its own rows; every other one is kept as it came.
COMPUTED_FIELDS = ("score", "rubric_items", "completion", "prompt_id", "completion_id", "length_adjusted_score")


class _Bad(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def _is_int(value: Any) -> bool:
    # JSON true/false arrive as bool, which is an int subclass in Python.
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> str:
    return json.dumps(value)[:80]


def _parse_item(i: int, value: Any) -> GradedItem:
    where = f"rubric_items[{i}]"
    if not isinstance(value, dict):
        raise _Bad(where, "must be an object with criterion, points, tags and criteria_met")
    for key in ("criterion", "points", "tags", "criteria_met"):
        if key not in value:
            hint = " (null for a grade that failed)" if key == "criteria_met" else ""
            raise _Bad(f"{where}.{key}", f"is missing{hint}")
    text = value["criterion"]
    if not isinstance(text, str) or not text.strip():
        raise _Bad(f"{where}.criterion", "must be a non-empty string")
    points = value["points"]
    if isinstance(points, float) and points.is_integer():
        points = int(points)  # the reference types points as float; the dataset has whole numbers
    if not _is_int(points) or not MIN_SMALLINT <= points <= MAX_SMALLINT:
        raise _Bad(
            f"{where}.points", f"must be a whole number from {MIN_SMALLINT} to {MAX_SMALLINT}, not {_text(points)}"
        )
    tags = value["tags"]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _Bad(f"{where}.tags", "must be a list of strings")
    if len(set(tags)) != len(tags):
        raise _Bad(f"{where}.tags", f"tag {next(t for t in tags if tags.count(t) > 1)!r} appears twice")
    met = value["criteria_met"]
    if met is not None and not isinstance(met, bool):
        raise _Bad(f"{where}.criteria_met", f"must be true, false or null (grade failed), not {_text(met)}")
    explanation = value.get("explanation")
    if explanation is None:
        explanation = ""
    elif not isinstance(explanation, str):
        # The reference copies whatever JSON the grader put there; keep it readable.
        explanation = json.dumps(explanation)
    return GradedItem(text, points, tuple(tags), met, explanation)


def _tokens(usage: Any, key: str) -> int | None:
    # Usage is informative: a missing or odd count is left out, but one too large for the
    # column is refused rather than stored wrong.
    value = usage.get(key) if isinstance(usage, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    if value > MAX_TOKENS:
        raise _Bad(f"usage.{key}", f"{value} is more than the largest token count stored, {MAX_TOKENS}")
    return value


def _parse_example(index: int, value: Any) -> ResultExample:
    if not isinstance(value, dict):
        raise _Bad("", "must be an object")
    prompt_id = value.get("prompt_id")
    if not isinstance(prompt_id, str) or not prompt_id.strip():
        raise _Bad("prompt_id", "must be a non-empty string")
    if too_long(prompt_id, MAX_PROMPT_ID):
        raise _Bad("prompt_id", str(too_long(prompt_id, MAX_PROMPT_ID)))
    completion_id = value.get("completion_id", "")
    if not isinstance(completion_id, str):
        raise _Bad("completion_id", f"must be a string, not {_text(completion_id)}")
    if too_long(completion_id, MAX_COMPLETION_ID):
        raise _Bad("completion_id", str(too_long(completion_id, MAX_COMPLETION_ID)))
    completion = value.get("completion")
    if not isinstance(completion, list) or len(completion) != 1 or not isinstance(completion[0], dict):
        raise _Bad("completion", "must be a list holding one message {content, role}")
    message = completion[0]
    if message.get("role") != "assistant":
        raise _Bad("completion[0].role", f"must be 'assistant', not {_text(message.get('role'))}")
    if not isinstance(message.get("content"), str):
        raise _Bad("completion[0].content", "must be a string")
    items = value.get("rubric_items")
    if not isinstance(items, list) or not items:
        raise _Bad("rubric_items", "must be a non-empty list of graded rubric items")
    usage = value.get("usage")
    return ResultExample(
        index=index,
        prompt_id=prompt_id,
        completion_id=completion_id,
        completion=message["content"],
        items=tuple(_parse_item(i, item) for i, item in enumerate(items)),
        input_tokens=_tokens(usage, "input_tokens"),
        output_tokens=_tokens(usage, "output_tokens"),
        kept={"keys": list(value)} | {k: v for k, v in value.items() if k not in COMPUTED_FIELDS},
    )


_EXAMPLE_PATH = re.compile(r"metadata\.example_level_metadata\[(\d+)\]\.?(.*)")


def _file_error(field: str, message: str) -> ResultsInvalid:
    # A problem found while decoding is named by its path; inside an example, name the example.
    inside = _EXAMPLE_PATH.fullmatch(field)
    if inside:
        return ResultsInvalid([ExampleError(int(inside[1]), None, inside[2], message)])
    return ResultsInvalid([ExampleError(None, None, field, message)])


def _load(data: bytes | mmap.mmap) -> Any:
    """The examples list, or raise ResultsInvalid for a file that is not a results file.

    A paper-size file is gigabytes, mostly ``htmls`` and ``convos``: when the file has the
    reference's layout, only the ``metadata`` value is decoded."""
    head = data[:65536]
    if len(data) <= len(head) and not head.strip():
        raise _file_error("", NO_ROWS)
    start = data.rfind(_METADATA_KEY)
    # A second "metadata" key is a duplicate that only decoding the whole file reports.
    if start >= 0 and data.find(_METADATA_KEY) == start:
        try:
            text = data[start + len(_METADATA_KEY) :].decode("utf-8")
        except UnicodeDecodeError:
            text = ""  # not the layout we guessed: decode the whole file below
        end = len(text.rstrip()) - 1
        if end > 0 and text[end] == "}":
            try:
                # The value sits one level inside the document.
                metadata = decode_json(text[:end], outer=1)
            except json.JSONDecodeError:
                pass  # not the layout we guessed: decode the whole file below
            except JsonProblem as exc:
                raise _file_error(f"metadata.{exc.field}" if exc.field else "", exc.message) from None
            else:
                return metadata
    try:
        text = (data[:] if isinstance(data, mmap.mmap) else data).decode("utf-8")
        document = decode_json(text)
    except UnicodeDecodeError as exc:
        raise _file_error("", f"is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise _file_error("", f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except JsonProblem as exc:
        raise _file_error(exc.field, exc.message) from None
    if not isinstance(document, dict) or "metadata" not in document:
        raise ResultsInvalid(
            [ExampleError(None, None, "metadata", "is missing: this is not a simple-evals *_allresults.json file")]
        )
    return document["metadata"]


def _length_adjustment(metadata: dict) -> LengthAdjustment | None:
    value = metadata.get("length_adjustment")
    if value is None:
        return None
    centre = value.get("centre") if isinstance(value, dict) else None
    penalty = value.get("penalty_per_500") if isinstance(value, dict) else None
    if (
        not isinstance(centre, int)
        or isinstance(centre, bool)
        or centre < 0
        or isinstance(penalty, bool)
        or not isinstance(penalty, int | float)
    ):
        raise ResultsInvalid(
            [
                ExampleError(
                    None,
                    None,
                    "metadata.length_adjustment",
                    'must be {"centre": whole characters >= 0, "penalty_per_500": a number}',
                )
            ]
        )
    if penalty < 0:
        raise ResultsInvalid([ExampleError(None, None, "metadata.length_adjustment.penalty_per_500", "must be >= 0")])
    return LengthAdjustment(centre, float(penalty))


@dataclass(frozen=True)
class ResultsFile:
    examples: list[ResultExample]
    length_adjustment: LengthAdjustment | None


def parse_results(data: bytes | mmap.mmap) -> list[ResultExample]:
    """Every example of a results file; raise ResultsInvalid listing the errors (up to MAX_ERRORS)."""
    return parse_results_file(data).examples


def parse_results_file(data: bytes | mmap.mmap) -> ResultsFile:
    """The examples of a results file and its length adjustment, if it names one."""
    metadata = _load(data)
    examples = metadata.get("example_level_metadata") if isinstance(metadata, dict) else None
    if not isinstance(examples, list):
        raise ResultsInvalid(
            [ExampleError(None, None, "metadata.example_level_metadata", "must be a list of examples")]
        )
    if not examples:
        raise _file_error("metadata.example_level_metadata", NO_ROWS)
    parsed: list[ResultExample] = []
    errors: list[ExampleError] = []
    for index, value in enumerate(examples):
        try:
            parsed.append(_parse_example(index, value))
        except _Bad as bad:
            prompt_id = value.get("prompt_id") if isinstance(value, dict) else None
            prompt_id = prompt_id if isinstance(prompt_id, str) else None
            errors.append(ExampleError(index, prompt_id, bad.field, bad.message))
            if len(errors) >= MAX_ERRORS:
                errors.append(ExampleError(index, None, "", f"stopped after {MAX_ERRORS} errors"))
                break
    if errors:
        raise ResultsInvalid(errors)
    return ResultsFile(parsed, _length_adjustment(metadata))


# --- writing ------------------------------------------------------------------------------


def results_document(
    *,
    score: float | None,
    metrics: dict[str, Any],
    examples: list[dict[str, Any]],
    length_adjustment: LengthAdjustment | None = None,
    grader: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A results file as simple-evals writes it, from examples already in its shape
    (prompt, completion, prompt_id, completion_id, rubric_items, score, usage).

    ``htmls`` is left empty (the reference renders one page per example; nothing reads them
    back) and ``convos`` holds each prompt followed by its completion, as the reference's."""
    metadata: dict[str, Any] = {"example_level_metadata": examples}
    if length_adjustment is not None:
        metadata["length_adjustment"] = {
            "centre": length_adjustment.centre,
            "penalty_per_500": length_adjustment.penalty_per_500,
        }
    if grader is not None:
        # How the run's grader compares with the reference's; reference tools ignore it.
        metadata["grader"] = grader
    return {
        "score": score,
        "metrics": metrics,
        "htmls": [],
        "convos": [example.get("prompt", []) + example["completion"] for example in examples],
        # Last, as in the reference, so that import_run can decode only this part.
        "metadata": metadata,
    }


def dump_results(document: dict[str, Any]) -> str:
    """The file text: json.dumps(indent=2), as simple-evals writes ``*_allresults.json``."""
    return json.dumps(document, indent=2)
