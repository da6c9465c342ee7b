"""Per-response grading: the prompt about all criteria of one response, how long rubrics are
split, how the answer is read (and which criteria fall back to their own call), and the same
through the client against the test server."""

import asyncio
import itertools
import json

import pytest

from grading.pipeline import client as llm
from grading.pipeline import grader_prompt as gp
from grading.pipeline import response_prompt as rp
from grading.pipeline.client import RetryPolicy, ask_grader, ask_grader_chunk
from grading.pipeline.endpoint import CallTarget
from grading.pipeline.rate_limit import LocalRateLimiter
from grading.pipeline.request_shape import chunk_request, criterion_request

pytest_plugins = ["tests.llm_server"]

FAST = RetryPolicy(max_attempts=3, format_attempts=3, base_delay=0.02, max_delay=0.1)
MESSAGES = [{"role": "user", "content": "I have a cold. What helps?"}]
RESPONSE = "Drink fluids, rest, and take honey for the cough."
CRITERIA = [("Mentions need:fluids", 5), ("Mentions need:antibiotics", -4), ("Suggests need:honey", 3)]


def entry(i, met, explanation="why"):
    return {"id": i, "explanation": explanation, "criteria_met": met}


# --- the prompt ---------------------------------------------------------------------------


def test_the_prompt_puts_instructions_then_conversation_then_the_numbered_criteria_last():
    prompt = rp.render_chunk(conversation=gp.conversation_block(MESSAGES, RESPONSE), items=CRITERIA)
    instructions, conversation, criteria = (
        prompt.index("# How to judge"),
        prompt.index("assistant: Drink fluids"),
        prompt.index("1. [5] Mentions need:fluids"),
    )
    assert instructions < conversation < criteria
    assert prompt.rstrip().endswith("3. [3] Suggests need:honey")
    assert "one short sentence" in prompt
    assert "<<" not in prompt


def test_two_chunks_of_one_response_share_everything_before_their_criteria():
    conversation = gp.conversation_block(MESSAGES, RESPONSE)
    first = rp.render_chunk(conversation=conversation, items=CRITERIA[:2])
    second = rp.render_chunk(conversation=conversation, items=CRITERIA[2:])
    shared = first.index("1. [5]")
    assert first[:shared] == second[:shared]


def test_the_per_criterion_prompt_also_ends_with_its_criterion():
    prompt = gp.render(gp.DEFAULT_TEMPLATE, conversation=gp.conversation_block(MESSAGES, RESPONSE), item="[5] x")
    assert prompt.rstrip().endswith("[5] x")
    assert prompt.index("# How to judge") < prompt.index("assistant: Drink")


def test_the_explanation_length_is_asked_in_words_and_unknown_ones_are_refused():
    prompt = rp.render_chunk(conversation="c", items=CRITERIA, explanation="words")
    assert "a few words" in prompt
    with pytest.raises(ValueError, match="explanation length 'essay'"):
        rp.render_chunk(conversation="c", items=CRITERIA, explanation="essay")


def test_a_placeholder_inside_the_conversation_is_sent_as_written():
    prompt = rp.render_chunk(conversation="says <<rubric_items>>", items=CRITERIA)
    assert "says <<rubric_items>>" in prompt


@pytest.mark.parametrize(
    ("n", "sizes"), [(0, []), (1, [1]), (20, [20]), (21, [11, 10]), (23, [12, 11]), (48, [16, 16, 16])]
)
def test_long_rubrics_are_split_into_even_calls_of_at_most_the_limit(n, sizes):
    bounds = rp.chunk_bounds(n)
    assert [stop - start for start, stop in bounds] == sizes
    assert all(b[1] == a[0] for b, a in itertools.pairwise(bounds))


def test_a_calls_tokens_are_shared_so_that_they_add_up():
    assert rp.split_usage(10, 3) == [4, 3, 3]
    assert sum(rp.split_usage(12_345, 7)) == 12_345


# --- the request --------------------------------------------------------------------------


def target(**changes):
    fields = {"base_url": "http://x/v1", "model": "m", "api_key_env": "", "temperature": 0.0, "max_tokens": 900}
    return CallTarget(**{**fields, "timeout": 5.0, **changes})


def test_a_chunk_request_sends_the_strict_schema_where_the_endpoint_honours_one():
    path, body = chunk_request(target(structured_output=True), "prompt")
    assert path == "/chat/completions"
    assert body["messages"] == [{"role": "user", "content": "prompt"}]
    assert body["response_format"]["json_schema"] == {
        "name": "rubric_grades",
        "schema": rp.CHUNK_SCHEMA,
        "strict": True,
    }
    path, body = chunk_request(target(api_style="responses", structured_output=True), "prompt", max_tokens=1800)
    assert path == "/responses"
    assert body["text"]["format"]["name"] == "rubric_grades"
    assert body["max_output_tokens"] == 1800
    assert "response_format" not in chunk_request(target(), "prompt")[1]


def test_a_criterion_request_is_the_one_the_client_always_sent():
    _, body = criterion_request(target(structured_output=True), "p")
    assert body["response_format"]["json_schema"]["name"] == "rubric_grade"
    assert body["max_tokens"] == 900
    assert body["temperature"] == 0.0


# --- reading the answer -------------------------------------------------------------------


def test_every_entry_becomes_its_criterions_verdict():
    answer = rp.read_chunk_answer(json.dumps({"criteria": [entry(1, True), entry(2, False, "no")]}), 2)
    assert answer.verdicts[1] == gp.GraderAnswer(met=True, explanation="why")
    assert answer.verdicts[2].met is False
    assert answer.fallback == ()
    assert answer.entries is not None
    assert json.loads(answer.entries[2]) == entry(2, False, "no")


def test_an_answer_in_a_fenced_block_after_a_draft_is_read_from_its_last_object():
    draft = json.dumps({"criteria": [entry(1, False)]})
    final = json.dumps({"criteria": [entry(1, True)]})
    assert rp.read_chunk_answer(f"Draft: {draft}\nOn reflection:\n```json\n{final}\n```", 1).verdicts[1].met


@pytest.mark.parametrize(
    ("entries", "fallback", "unknown"),
    [
        ([entry(1, True), entry(3, False)], (2,), 0),  # missing
        ([entry(1, True), entry(2, True), entry(2, False), entry(3, True)], (2,), 0),  # duplicated
        ([entry(1, True), entry(2, "yes"), entry(3, 1)], (2, 3), 0),  # not booleans
        ([entry(1, True), entry(2, True), entry(3, True), entry(4, True), entry(0, True)], (), 2),  # unknown
        ([entry("1", True), entry(True, True), entry(2, True), entry(3, True)], (1,), 2),  # ids not numbers
    ],
)
def test_unusable_entries_leave_only_their_criteria_to_a_call_of_their_own(entries, fallback, unknown):
    answer = rp.read_chunk_answer(json.dumps({"criteria": entries}), 3)
    assert answer.fallback == fallback
    assert answer.unknown == unknown
    assert set(answer.verdicts) == {1, 2, 3} - set(fallback)


@pytest.mark.parametrize("text", ["", "All met.", '{"criteria_met": true}', '{"criteria": "all"}', None])
def test_an_answer_without_a_criteria_list_is_unreadable(text):
    with pytest.raises(gp.MalformedAnswer, match="criteria list"):
        rp.read_chunk_answer(text, 3)


# --- through the client, against the test server --------------------------------------------

NO_LIMIT = LocalRateLimiter()


def run(coroutine):
    async def then_close():
        try:
            return await coroutine
        finally:
            await llm.close_clients()

    return asyncio.run(then_close())


def server_target(server, **changes):
    return target(base_url=server.url, model="grader", **changes)


def ask_chunk(server, criteria=CRITERIA, response=RESPONSE, **changes):
    conversation = gp.conversation_block(MESSAGES, response)
    prompt = rp.render_chunk(conversation=conversation, items=criteria)

    def fallback(index):
        text, points = criteria[index]
        return gp.render(gp.DEFAULT_TEMPLATE, conversation=conversation, item=gp.rubric_item(text, points))

    return run(
        ask_grader_chunk(
            server_target(server, **changes), prompt, len(criteria), fallback, limiter=NO_LIMIT, policy=FAST
        )
    )


@pytest.mark.parametrize("structured", [False, True])
def test_the_server_gives_each_criterion_the_verdict_of_its_per_criterion_answer(llm_server, structured):
    outcomes = ask_chunk(llm_server, structured_output=structured)
    assert [o.met for o in outcomes] == [True, False, True]
    conversation = gp.conversation_block(MESSAGES, RESPONSE)
    one_by_one = [
        run(
            ask_grader(
                server_target(llm_server),
                gp.render(gp.DEFAULT_TEMPLATE, conversation=conversation, item=gp.rubric_item(text, points)),
                limiter=NO_LIMIT,
                policy=FAST,
            )
        ).met
        for text, points in CRITERIA
    ]
    assert one_by_one == [o.met for o in outcomes]
    assert llm_server.calls == 4  # one chunk call, then three per-criterion ones
    assert not any(o.fallback for o in outcomes)


def test_a_chunks_usage_is_shared_and_its_request_counted_once(llm_server):
    outcomes = ask_chunk(llm_server)
    assert [o.attempts for o in outcomes] == [1, 0, 0]
    prompt_tokens = sum(o.prompt_tokens for o in outcomes)
    assert prompt_tokens > 0
    assert max(o.prompt_tokens for o in outcomes) - min(o.prompt_tokens for o in outcomes) <= 1


@pytest.mark.parametrize("kind", ["missing", "duplicate", "non_boolean"])
def test_a_faulty_entry_is_graded_by_its_own_call_only(llm_server, kind):
    criteria = [CRITERIA[0], (f"Mentions need:rest entry:{kind}", 2), CRITERIA[2]]
    outcomes = ask_chunk(llm_server, criteria=criteria)
    assert [o.met for o in outcomes] == [True, True, True]
    assert [o.fallback for o in outcomes] == [False, True, False]
    assert llm_server.calls == 2
    assert outcomes[1].attempts == 1  # its own call; the chunk's request is counted on the first


def test_an_unknown_extra_entry_is_ignored(llm_server):
    outcomes = ask_chunk(llm_server, criteria=[CRITERIA[0], ("Says need:rest entry:unknown", 2)])
    assert [o.met for o in outcomes] == [True, True]
    assert llm_server.calls == 1


def test_a_refusal_fails_every_criterion_of_the_chunk_and_none_is_not_met(llm_server):
    outcomes = ask_chunk(llm_server, criteria=[CRITERIA[0], ("Says need:rest fault:refusal:9", 2)])
    assert [o.met for o in outcomes] == [None, None]
    assert all("refused" in o.error for o in outcomes)


def test_an_unreadable_chunk_answer_is_asked_again(llm_server):
    outcomes = ask_chunk(llm_server, criteria=[CRITERIA[0], ("Says need:rest fault:malformed:1", 2)])
    assert [o.met for o in outcomes] == [True, True]
    assert outcomes[0].attempts == 2
