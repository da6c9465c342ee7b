"""The bad-input corpus: one file per bad case and per file format, each with what the refusal
must name. Built from the good rows of tests.healthbench_rows / metaeval_rows / test_import_run
so that every file differs from an importable one in exactly the one way its name says."""

import json
from dataclasses import dataclass

from tests.healthbench_rows import consensus_row, row
from tests.metaeval_rows import grader_row, meta_row

DEEP = "[" * 100_000 + "]" * 100_000


@dataclass(frozen=True)
class BadCase:
    name: str
    content: bytes
    line: int  # 0: the file as a whole
    field: str
    message: str  # a fragment of the refusal


def _jsonl(*rows: dict) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def _with(data: dict, path: list, value) -> dict:
    data = json.loads(json.dumps(data))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


def _deep_line(data: dict, path: list) -> bytes:
    # A placeholder string swapped for the nested arrays after encoding.
    return json.dumps(_with(data, path, "__DEEP__")).replace('"__DEEP__"', DEEP).encode() + b"\n"


def _duplicate_line(data: dict, key: str) -> bytes:
    text = json.dumps(data)
    return ("{" + json.dumps(key) + ": " + json.dumps(data[key]) + ", " + text[1:]).encode() + b"\n"


def _common(good: dict, bad_base: dict, text_path: list, text_field: str) -> list[BadCase]:
    """The cases every JSONL format shares; line 1 is good, line 2 is bad."""
    first = _jsonl(good)
    return [
        BadCase("empty", b"", 0, "", "the file has no rows"),
        BadCase("blank-lines", b"\n  \n\r\n", 0, "", "the file has no rows"),
        BadCase("lone-surrogate", first + _jsonl(_with(bad_base, text_path, "a \ud800 b")), 2, text_field,
                "holds a lone surrogate (\\ud800) at character 3"),
        BadCase("nul", first + _jsonl(_with(bad_base, text_path, "a \x00 b")), 2, text_field,
                "holds a NUL character (\\u0000) at character 3"),
        BadCase("duplicate-key", first + _duplicate_line(bad_base, "prompt_id"), 2, "prompt_id",
                "appears twice in the same object"),
        BadCase("deep-nesting", first + _deep_line(bad_base, text_path), 2, "",
                "nests arrays/objects more than 32 levels deep"),
    ]  # fmt: skip


def healthbench_cases() -> list[BadCase]:
    good, bad = row("good-1"), row("bad-2")
    cluster = consensus_row("bad-2")
    return [
        *_common(good, bad, ["prompt", 0, "content"], "prompt[0].content"),
        BadCase("surrogate-in-a-tag", _jsonl(good, _with(bad, ["example_tags"], ["theme:hedging", "\udfff"])), 2,
                "example_tags[1]", "holds a lone surrogate (\\udfff)"),
        BadCase("surrogate-in-a-key", _jsonl(good, {**bad, "\udc00": 1}), 2, "\\udc00",
                "holds a lone surrogate (\\udc00) at character 1"),
        BadCase("nul-in-a-criterion", _jsonl(good, _with(bad, ["rubrics", 1, "criterion"], "x\x00")), 2,
                "rubrics[1].criterion", "holds a NUL character"),
        BadCase("duplicate-nested-key", _jsonl(good) + json.dumps(bad).replace(
            '"points": 8', '"points": 8, "points": 9').encode() + b"\n", 2, "rubrics[1].points", "appears twice"),
        BadCase("long-prompt-id", _jsonl(good, _with(bad, ["prompt_id"], "p" * 101)), 2, "prompt_id",
                "is 101 characters long; at most 100 are allowed"),
        BadCase("long-theme", _jsonl(good, _with(bad, ["example_tags"], ["theme:" + "t" * 33])), 2,
                "example_tags[0]", "the theme name is 33 characters long; at most 32 are allowed"),
        BadCase("long-cluster-tag", _jsonl(good, _with(cluster, ["rubrics", 1, "tags", 1], "cluster:" + "c" * 193)),
                2, "rubrics[1].tags", "the cluster: tag is 201 characters long; at most 200 are allowed"),
        BadCase("long-ideal-group", _jsonl(good, _with(cluster, ["ideal_completions_data", "ideal_completions_group"],
                "Group " + "9" * 27)), 2, "ideal_completions_data.ideal_completions_group",
                "is 33 characters long; at most 32 are allowed"),
    ]  # fmt: skip


def meta_eval_cases() -> list[BadCase]:
    good, bad = meta_row("p-1", "c-1"), meta_row("p-2", "c-2")
    return [
        *_common(good, bad, ["completion"], "completion"),
        BadCase("long-completion-id", _jsonl(good, _with(bad, ["completion_id"], "c" * 101)), 2, "completion_id",
                "is 101 characters long; at most 100 are allowed"),
        BadCase("long-category", _jsonl(good, _with(bad, ["category"], "cluster:" + "c" * 193)), 2, "category",
                "is 201 characters long; at most 200 are allowed"),
        BadCase("surrogate-in-the-rubric", _jsonl(good, _with(bad, ["rubric"], "\ud83d")), 2, "rubric",
                "holds a lone surrogate (\\ud83d)"),
    ]  # fmt: skip


def grader_label_cases() -> list[BadCase]:
    good, bad = grader_row("p-1", "c-1"), grader_row("p-1", "c-2")
    return [
        *_common(good, bad, ["explanation"], "explanation"),
        BadCase("long-completion-id", _jsonl(good, _with(bad, ["completion_id"], "c" * 101)), 2, "completion_id",
                "is 101 characters long; at most 100 are allowed"),
    ]  # fmt: skip


def results_cases() -> list[BadCase]:
    """simple-evals results files: one JSON document; `line` is unused, errors name the example."""
    from tests.test_import_run import graded_row, results_document

    data = row("p-0")  # stored by the corpus test's fixture
    good = graded_row(data, [True, False, True])

    def document(example: dict | None = None, *, raw: str | None = None) -> bytes:
        text = raw if raw is not None else json.dumps(results_document([good, example or good]), indent=2)
        return text.encode()

    example_text = json.dumps(results_document([good, _with(good, ["rubric_items", 0, "explanation"], "__X__")]),
                              indent=2)  # fmt: skip
    duplicated = json.dumps(results_document([good, good]), indent=2)
    at = duplicated.rindex('"prompt_id": "p-0"')
    duplicated = duplicated[:at] + '"prompt_id": "p-0", ' + duplicated[at:]
    return [
        BadCase("empty", b"  \n", 0, "", "the file has no rows"),
        BadCase("no-examples", json.dumps(results_document([]), indent=2).encode(), 0,
                "metadata.example_level_metadata", "the file has no rows"),
        BadCase("lone-surrogate", document(_with(good, ["rubric_items", 0, "explanation"], "a \udbff")), 1,
                "rubric_items[0].explanation", "holds a lone surrogate (\\udbff)"),
        BadCase("nul", document(_with(good, ["completion", 0, "content"], "a \x00")), 1, "completion[0].content",
                "holds a NUL character"),
        BadCase("duplicate-key", document(raw=duplicated), 1, "prompt_id", "appears twice in the same object"),
        BadCase("deep-nesting", document(raw=example_text.replace('"__X__"', DEEP)), 0, "",
                "nests arrays/objects more than"),
        BadCase("huge-token-count", document(_with(good, ["usage", "input_tokens"], 10**20)), 1,
                "usage.input_tokens", "100000000000000000000 is more than the largest token count stored, 2147483647"),
        BadCase("huge-points", document(_with(good, ["rubric_items", 0, "points"], 10**20)), 1,
                "rubric_items[0].points", "must be a whole number from -32768 to 32767"),
        BadCase("long-completion-id", document(_with(good, ["completion_id"], "c" * 101)), 1, "completion_id",
                "is 101 characters long; at most 100 are allowed"),
    ]  # fmt: skip
