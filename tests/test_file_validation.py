"""The shared checks of annotation.formats.validation, as plain functions, and the limits the
files are held to, which must stay equal to the database columns they fill."""

import json
import time

import pytest

from annotation.formats import healthbench
from annotation.formats import validation as v
from annotation.models import ConsensusCriterion, Conversation, Criterion, IdealResponse, Physician
from grading.models import Grade, Response


def test_the_file_limits_are_the_column_sizes():
    assert v.MAX_PROMPT_ID == Conversation._meta.get_field("prompt_id").max_length
    assert v.MAX_THEME == Conversation._meta.get_field("theme").max_length
    assert v.MAX_THEME == ConsensusCriterion._meta.get_field("theme").max_length
    assert v.MAX_CLUSTER == ConsensusCriterion._meta.get_field("cluster").max_length
    assert v.MAX_IDEAL_GROUP == IdealResponse._meta.get_field("group").max_length
    assert v.MAX_COMPLETION_ID == Response._meta.get_field("completion_id").max_length
    assert v.MAX_PHYSICIAN_ID == Physician._meta.get_field("anonymized_id").max_length
    # The canary was widened to text: a file's canary is stored whatever its length.
    assert getattr(Conversation._meta.get_field("canary"), "max_length", None) is None
    for model in (Criterion, Grade):
        assert model._meta.get_field("points").get_internal_type() == "SmallIntegerField"
    assert Response._meta.get_field("prompt_tokens").get_internal_type() == "PositiveIntegerField"


def test_it_decodes_ordinary_json_unchanged():
    text = json.dumps({"a": ["x", {"b": "caf\u00e9 \U0001f600"}], "c": None})
    assert v.decode_json(text) == json.loads(text)


def test_a_surrogate_pair_is_one_valid_character_not_a_lone_surrogate():
    assert v.decode_json('{"emoji": "\\ud83d\\ude00"}') == {"emoji": "\U0001f600"}


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ('{"a": {"b": ["ok", "x\\ud800"]}}', "a.b[1]", "lone surrogate (\\ud800) at character 2"),
        ('{"a": "\\u0000"}', "a", "NUL character"),
        ('{"a": [1, {"k": 1, "k": 2}]}', "a[1].k", "appears twice in the same object"),
        ('{"a\\udc00": 1}', "a\\udc00", "lone surrogate"),
    ],
)
def test_it_names_the_field_of_a_bad_value(text, field, fragment):
    with pytest.raises(v.JsonProblem) as problem:
        v.decode_json(text)
    assert problem.value.field == field
    assert fragment in problem.value.message


def test_an_escaped_backslash_before_u0000_is_plain_text():
    assert v.decode_json('["\\\\u0000"]') == ["\\u0000"]


def test_deep_nesting_is_refused_without_recursion():
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(v.JsonProblem, match="more than 32 levels deep"):
        v.decode_json(text)
    assert v.decode_json("[" * 32 + "]" * 32) is not None


def _outcome(decode):
    try:
        return ("value", decode())
    except v.JsonProblem as problem:
        return ("problem", problem.field, problem.message)
    except json.JSONDecodeError as error:
        return ("not json", error.msg, error.pos)
    except ValueError as error:
        return ("refused by the check", str(error))


def _only_a_string_at_a(value):
    # Refuses anything but {"a": "<text>"}, so it refuses every value nested deeper than 2 levels.
    if not isinstance(value, dict) or set(value) != {"a"} or not isinstance(value["a"], str):
        raise ValueError("not a string at a")
    return value["a"]


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "x"}',
        '{"a": 1}',
        '{"a": ' + "[" * 40 + "]" * 40 + "}",  # too deep and refused by the check: too deep wins
        "[" * 5_000 + "]" * 5_000,  # past the interpreter's recursion limit
        '{"a": "x", "a": "y"}',
        '{"a": {"b": 1, "b": 2}}',
        '{"a": "x\u0000"}',
        '{"a": "\ud800"}',
        '{"a": ["\ud800"], "a": 1}',
        '{"a": "x"',
        "",
    ],
)
def test_decode_json_then_refuses_what_decode_json_and_then_the_check_refuse(text):
    # The quick path skips the depth walk only for what the check takes.
    expected = _outcome(lambda: _only_a_string_at_a(v.decode_json(text)))
    assert _outcome(lambda: v.decode_json_then(text, _only_a_string_at_a)) == expected
    assert expected[0] in ("value", "problem", "not json", "refused by the check")


def test_a_line_decoded_for_any_reader_is_still_walked_for_its_depth():
    # decode_line takes any object, so it has no parser to refuse a deep one: it walks it.
    deep = b'{"a": ' + b"[" * 40 + b"]" * 40 + b"}"
    with pytest.raises(healthbench.RowInvalid, match="more than 32 levels deep"):
        healthbench.decode_line(3, deep)
    assert healthbench.decode_line(3, b'{"a": [[1]]}') == {"a": [[1]]}


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({"text": "[" * 500 + '\\" {{{' + "]" * 3})
    assert v.decode_json(text)["text"].startswith("[[[")


def test_split_lines_reassembles_lines_across_chunks():
    chunks = [b'{"a": 1}\n{"b"', b': 2}\n\n{"c": 3}', b"\n", b'{"d": 4}']
    assert list(v.split_lines(chunks)) == [b'{"a": 1}\n', b'{"b": 2}\n', b"\n", b'{"c": 3}\n', b'{"d": 4}']


def test_split_lines_never_assembles_a_line_over_the_limit():
    chunks = [b"x" * 100 for _ in range(50)] + [b"\nnext\n"]
    out = list(v.split_lines(chunks, max_line_bytes=1000))
    assert out == [v.LineTooLong(5001), b"next\n"]
    assert "5,001 bytes long" in out[0].message


def test_split_lines_takes_linear_time_on_one_long_line():
    # Four times the bytes in one (refused) line cost about four times the time, not sixteen.
    def seconds(n_chunks: int) -> float:
        chunk = b"y" * 65536
        start = time.perf_counter()
        out = list(v.split_lines((chunk for _ in range(n_chunks)), max_line_bytes=1 << 20))
        assert out == [v.LineTooLong(n_chunks * 65536)]
        return time.perf_counter() - start

    small, large = min(seconds(400) for _ in range(3)), min(seconds(1600) for _ in range(3))
    assert large < small * 8 + 0.01


def test_numbered_lines_skips_blank_lines_and_keeps_numbers():
    assert list(v.numbered_lines([b"a\r\n", b"\n", b"  \n", b"b"])) == [(1, b"a"), (4, b"b")]


def test_stored_json_is_repaired_on_read():
    assert v.loads_repaired('["a\\ud800", {"k\\u0000": "\\udfff"}]') == ["a\ufffd", {"k\ufffd": "\ufffd"}]
