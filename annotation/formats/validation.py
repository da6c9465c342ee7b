"""What every file reader checks before it trusts a value, in one place.

Pure Python, no Django. The HealthBench rows, the meta-eval rows, the grader labels and the
simple-evals results file all decode JSON through `decode_json`, read lines through
`file_lines`/`numbered_lines` and check lengths against the column sizes below, so a bad
file gets the same refusal, worded the same way, from every importer and on every database.

Python's `json` accepts things a database or a browser cannot take: a lone surrogate
(`"\\ud800"`) cannot be encoded as UTF-8 (pages that show it fail), PostgreSQL text refuses
NUL, a repeated key silently keeps the last value (so an export would differ from the file),
and a deeply nested array exhausts the interpreter's stack.
"""

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar

T = TypeVar("T")

# Nesting the public files need: a results file goes 7 levels deep (document, metadata,
# examples, example, rubric_items, item, tags). 32 leaves room and stays far below the
# interpreter's recursion limit.
MAX_DEPTH = 32
# The longest public row is about 42 KB; a line past 16 MiB is not a HealthBench row.
MAX_LINE_BYTES = 16 * 1024 * 1024
# What the browser import takes; the commands read files of any size.
MAX_UPLOAD_BYTES = 256 * 1024 * 1024
READ_CHUNK = 1024 * 1024

# Column sizes of the values files carry (tests/test_file_validation.py keeps them equal to the
# models). Identifiers and short labels are refused when longer; free text has no limit.
MAX_PROMPT_ID = 100  # Conversation.prompt_id
MAX_COMPLETION_ID = 100  # Response.completion_id
MAX_CLUSTER = 200  # ConsensusCriterion.cluster
MAX_THEME = 32  # Conversation.theme, ConsensusCriterion.theme
MAX_IDEAL_GROUP = 32  # IdealResponse.group
MAX_PHYSICIAN_ID = 64  # Physician.anonymized_id
MAX_TOKENS = 2_147_483_647  # Response/Grade prompt_tokens, completion_tokens (integer columns)
MIN_SMALLINT, MAX_SMALLINT = -32768, 32767  # Criterion.points, Grade.points

NO_ROWS = "the file has no rows (it is empty or holds only blank lines)"


class FileRefused(Exception):
    """A file refused whole, nothing written: `errors` names each bad line or example and its
    field. Every importer raises a subclass, so commands and pages report them alike."""

    def __init__(self, errors: Sequence[object]):
        self.errors: list[Any] = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


# A lone surrogate or NUL can only reach a decoded string through a \u escape (raw UTF-8
# cannot encode a surrogate and JSON refuses raw control characters), so a line without
# one of these escapes needs no walk over its strings.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")


class JsonProblem(Exception):
    """A decoded line or document that breaks a rule; `field` is a path such as rubrics[2].tags."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class LineTooLong:
    """Stands in for a line longer than MAX_LINE_BYTES, which is never held in memory."""

    size: int

    @property
    def message(self) -> str:
        return (
            f"is {self.size:,} bytes long; a line may hold at most {MAX_LINE_BYTES:,} bytes "
            f"(is this a JSONL file, one object per line?)"
        )


def too_long(value: str, limit: int) -> str | None:
    """The refusal for a value longer than its column, else None."""
    if len(value) <= limit:
        return None
    return f"is {len(value):,} characters long; at most {limit} are allowed"


def describe_character(text: str, position: int) -> str:
    char = text[position]
    if char == "\x00":
        return f"holds a NUL character (\\u0000) at character {position + 1}; text may not contain NUL"
    return (
        f"holds a lone surrogate (\\u{ord(char):04x}) at character {position + 1}; text must be valid Unicode "
        f"(a surrogate is only valid as half of a pair)"
    )


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    # A key may itself hold the bad character: the path shows it as an escape, so that the
    # message naming it can always be printed and rendered.
    key = BAD_CHARACTER.sub(lambda found: f"\\u{ord(found[0]):04x}", key)
    return f"{parent}.{key}" if parent else key


class _Duplicated(dict):
    """An object whose pairs repeated a key; remembered so the error can name where it is."""

    duplicate: str = ""


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """(path, value) for every value inside `value`, keys included as their own path; no recursion."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        yield path, item
        if isinstance(item, dict):
            for key, child in reversed(item.items()):
                yield _path(path, key), key
                stack.append((_path(path, key), child))
        elif isinstance(item, list):
            stack.extend((_path(path, i), child) for i, child in reversed(list(enumerate(item))))


def find_bad_text(value: Any) -> tuple[str, str] | None:
    """(path, message) of the first string (key or value) holding NUL or a lone surrogate."""
    for path, item in _walk(value):
        if isinstance(item, str):
            found = BAD_CHARACTER.search(item)
            if found:
                return path, describe_character(item, found.start())
    return None


def replace_bad_text(value: Any) -> Any:
    """`value` with every NUL and lone surrogate replaced by U+FFFD (for data already stored)."""
    if isinstance(value, str):
        return BAD_CHARACTER.sub("\ufffd", value)
    if isinstance(value, list):
        return [replace_bad_text(v) for v in value]
    if isinstance(value, dict):
        return {replace_bad_text(k): replace_bad_text(v) for k, v in value.items()}
    return value


def may_hold_bad_text(json_text: str) -> bool:
    """False when JSON text certainly decodes to strings free of NUL and lone surrogates."""
    return _SUSPECT_ESCAPE.search(json_text) is not None


def loads_repaired(json_text: str) -> Any:
    """json.loads for text read back from the database: bad characters come out as U+FFFD."""
    value = json.loads(json_text)
    return replace_bad_text(value) if may_hold_bad_text(json_text) else value


def _too_deep(value: Any, limit: int) -> bool:
    """Whether arrays/objects in a decoded value nest more than `limit` levels; no recursion."""
    level, depth = [value], 1
    while level:
        if depth > limit:
            return True
        deeper = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, dict | list):
                    deeper.append(child)
        level, depth = deeper, depth + 1
    return False


def check_depth(value: Any, text: str, limit: int = MAX_DEPTH, *, outer: int = 0) -> None:
    """Raise JsonProblem when the decoded `value` of `text` nests deeper than `limit`.

    `outer` is how many levels enclose `text` in its document (when only a part is decoded).
    Only containers are visited, and only when the text has enough brackets to be too deep.
    """
    if not isinstance(value, dict | list) or text.count("[") + text.count("{") + outer <= limit:
        return
    if _too_deep(value, limit - outer):
        raise JsonProblem("", f"nests arrays/objects more than {limit} levels deep")


def decode_json(text: str, *, max_depth: int = MAX_DEPTH, outer: int = 0) -> Any:
    """Decode JSON text, refusing what `json.loads` would let through.

    Raises json.JSONDecodeError for text that is not JSON, and JsonProblem (naming the field)
    for nesting deeper than `max_depth`, a key repeated in one object, or a string holding NUL
    or a lone surrogate.
    """
    duplicates: list[str] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        seen: set[str] = set()
        marked = _Duplicated(obj)
        marked.duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        duplicates.append(marked.duplicate)
        return marked

    try:
        value = json.JSONDecoder(object_pairs_hook=pairs_hook).decode(text)
    except RecursionError:
        # Far deeper than the limit: the C decoder guards its recursion and stops cleanly
        # (at the interpreter's limit, ~1000 levels); the stated limit is checked below.
        raise JsonProblem("", f"nests arrays/objects more than {max_depth} levels deep") from None
    check_depth(value, text, max_depth, outer=outer)
    if duplicates:
        for path, item in _walk(value):
            if isinstance(item, _Duplicated):
                raise JsonProblem(
                    _path(path, item.duplicate),
                    "appears twice in the same object; each key may appear once (a reader would keep only "
                    "the last value)",
                )
    if may_hold_bad_text(text):
        bad = find_bad_text(value)
        if bad:
            raise JsonProblem(*bad)
    return value


class _RepeatedKey(Exception):
    """Leaves the quick decode of `decode_json_then`: `decode_json` then names the key."""


def _pairs_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _RepeatedKey
    return obj


_QUICK = json.JSONDecoder(object_pairs_hook=_pairs_once)


def decode_json_then(text: str, check: Callable[[Any], T]) -> T:
    """`check(decode_json(text))`, refusing exactly what that refuses, first refusal first.

    `check` must refuse every value nested deeper than MAX_DEPTH, as a parser of rows of known
    shapes does (a HealthBench row is 4 levels deep). A value it accepts then needs no walk
    for its depth (a third of the cost of decoding a HealthBench row); a value it refuses is
    walked before its refusal is raised, so that too deep is still the refusal given. Text
    that is not JSON, repeats a key or may hold a bad character goes through `decode_json`.
    """
    try:
        value = _QUICK.decode(text)
    except (ValueError, RecursionError, _RepeatedKey):  # json.JSONDecodeError is a ValueError
        return check(decode_json(text))
    if may_hold_bad_text(text):
        return check(decode_json(text))
    try:
        return check(value)
    except Exception:
        check_depth(value, text)
        raise


def file_lines(stream: BinaryIO, *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes | LineTooLong]:
    """The lines of a binary file, read in chunks: see `split_lines`."""
    return split_lines(iter(lambda: stream.read(READ_CHUNK), b""), max_line_bytes=max_line_bytes)


def split_lines(chunks: Iterable[bytes], *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes | LineTooLong]:
    """Lines (with their newline) from chunks of bytes, in time linear in the bytes.

    A line longer than `max_line_bytes` is yielded as a LineTooLong and never assembled, so
    memory stays bounded by one chunk plus one line of the allowed size.
    """
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end + 1
            size += stop - start
            if size <= max_line_bytes:
                parts.append(chunk[start:stop])
            else:
                parts.clear()
            start = stop
            if end >= 0:
                yield b"".join(parts) if size <= max_line_bytes else LineTooLong(size)
                parts.clear()
                size = 0
    if size:
        yield b"".join(parts) if size <= max_line_bytes else LineTooLong(size)


def numbered_lines(
    lines: Iterable[bytes | LineTooLong], *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes | LineTooLong]]:
    """(line number, line without its line end) for every line that is not blank."""
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, LineTooLong):
            yield number, raw
            continue
        if len(raw) > max_line_bytes:
            yield number, LineTooLong(len(raw))
            continue
        raw = raw.rstrip(b"\r\n")
        if raw.strip():
            yield number, raw
