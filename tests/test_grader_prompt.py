"""The grader prompt: how a conversation and a criterion are put to the grader, and how its
answer is read."""

import hashlib

import pytest

from grading.pipeline import grader_prompt as gp
from grading.pipeline import response_prompt

MESSAGES = [
    {"role": "user", "content": "My child has a fever of 39 C."},
    {"role": "assistant", "content": "How old is your child?"},
    {"role": "user", "content": "Two years old."},
]


def test_the_conversation_is_role_content_blocks_ending_with_the_response():
    block = gp.conversation_block(MESSAGES, "Give paracetamol and watch for warning signs.")
    assert block == (
        "user: My child has a fever of 39 C.\n\n"
        "assistant: How old is your child?\n\n"
        "user: Two years old.\n\n"
        "assistant: Give paracetamol and watch for warning signs."
    )


def test_the_rubric_item_is_its_points_in_brackets_then_its_text():
    assert gp.rubric_item("Advises urgent care.", -6) == "[-6] Advises urgent care."


def test_the_default_prompt_holds_the_conversation_the_item_and_the_answer_format():
    prompt = gp.render(
        gp.DEFAULT_TEMPLATE, conversation=gp.conversation_block(MESSAGES, "Rest."), item="[5] Says rest."
    )
    assert "user: Two years old.\n\nassistant: Rest." in prompt
    assert "[5] Says rest." in prompt
    assert '"criteria_met"' in prompt
    assert '"explanation"' in prompt
    assert "<<" not in prompt


def test_the_default_prompt_says_how_to_judge_negative_points():
    text = gp.DEFAULT_TEMPLATE.lower()
    assert "negative points" in text
    assert "does show that undesirable behaviour" in text


def test_a_response_that_contains_a_placeholder_is_sent_as_written():
    prompt = gp.render("C: <<conversation>> R: <<rubric_item>>", conversation="says <<rubric_item>>", item="[1] x")
    assert prompt == "C: says <<rubric_item>> R: [1] x"


def test_a_template_is_identified_by_the_sha256_of_its_text():
    assert gp.template_hash(gp.DEFAULT_TEMPLATE) == hashlib.sha256(gp.DEFAULT_TEMPLATE.encode()).hexdigest()
    assert gp.template_hash(gp.DEFAULT_TEMPLATE + " ") != gp.template_hash(gp.DEFAULT_TEMPLATE)


def test_a_template_file_is_read_and_checked(tmp_path):
    path = tmp_path / "published.txt"
    path.write_text("Conversation:\n<<conversation>>\nItem:\n<<rubric_item>>\n")
    assert gp.load_template(path).startswith("Conversation:")


@pytest.mark.parametrize(
    ("text", "missing"), [("<<conversation>> only", "<<rubric_item>>"), ("nothing", "<<conversation>>")]
)
def test_a_template_without_a_placeholder_is_refused_naming_the_file(tmp_path, text, missing):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(gp.TemplateError, match=rf"bad.txt: .*{missing}"):
        gp.load_template(path)


def test_a_missing_template_file_is_named():
    with pytest.raises(gp.TemplateError, match=r"cannot read the grader template /nowhere\.txt"):
        gp.load_template("/nowhere.txt")


def test_the_rendered_length_is_known_without_rendering():
    conversation, item = gp.conversation_block(MESSAGES, "Rest."), "[3] Says rest."
    prompt = gp.render(gp.DEFAULT_TEMPLATE, conversation=conversation, item=item)
    assert gp.rendered_length(gp.DEFAULT_TEMPLATE, conversation_chars=len(conversation), item_chars=len(item)) == len(
        prompt
    )


# --- reading answers ------------------------------------------------------------------------

ANSWER = '{"explanation": "It says so {clearly}.", "criteria_met": true}'


@pytest.mark.parametrize(
    "text",
    [
        ANSWER,
        f"```json\n{ANSWER}\n```",
        f"```\n{ANSWER}\n```",
        f"Let me think.\n{ANSWER}\nThat is my verdict.",
        f"Some notes {{not json}} first, then {ANSWER}",
    ],
)
def test_an_answer_is_read_bare_fenced_or_with_text_around_it(text):
    assert gp.parse_answer(text) == gp.GraderAnswer(met=True, explanation="It says so {clearly}.")


def test_the_last_verdict_counts_when_the_grader_corrects_itself():
    text = (
        '{"explanation": "draft", "criteria_met": true} On reflection: {"explanation": "final", "criteria_met": false}'
    )
    assert gp.parse_answer(text) == gp.GraderAnswer(met=False, explanation="final")


def test_a_missing_explanation_is_empty():
    assert gp.parse_answer('{"criteria_met": false}') == gp.GraderAnswer(met=False, explanation="")


@pytest.mark.parametrize("value", ['"yes"', '"true"', "1", "0", "null", "[true]"])
def test_criteria_met_that_is_not_a_json_boolean_is_invalid(value):
    with pytest.raises(gp.MalformedAnswer, match="not a JSON boolean"):
        gp.parse_answer(f'{{"explanation": "x", "criteria_met": {value}}}')


@pytest.mark.parametrize(
    "text", ["", None, "It meets the criterion.", '{"explanation": "no verdict"}', "{criteria_met: true}"]
)
def test_an_answer_without_a_readable_verdict_is_malformed(text):
    with pytest.raises(gp.MalformedAnswer, match="no JSON object with criteria_met"):
        gp.parse_answer(text)


def test_both_modes_judge_by_one_copy_of_the_rules_and_their_bytes_never_change():
    for template in (gp.DEFAULT_TEMPLATE, response_prompt.RESPONSE_TEMPLATE):
        assert template.count(gp.JUDGING_RULES) == 1
        assert template.count(gp.CONVERSATION_SECTION) == 1
    # Runs store these hashes: a change of one byte makes every earlier run's prompt "different".
    assert gp.template_hash(gp.DEFAULT_TEMPLATE) == ("8ccabb0fbb75d6f723526d9cdba8518134a0bcbd0c9a3a6a6d7398b871ff26a7")
    assert response_prompt.RESPONSE_TEMPLATE_HASH == "397bbd0d354433a1ae3ff6d085306e67ec17ee7902a3fde8abb129897070d965"


# --- read as the reference reads it (Endpoint.lenient_answers off) ---------------------------

VERDICT = '{"explanation": "Named.", "criteria_met": true}'


@pytest.mark.parametrize("text", [VERDICT, f"```json\n{VERDICT}\n```", f"  {VERDICT}\n"])
def test_not_lenient_an_answer_is_read_as_the_reference_reads_it(text):
    assert gp.parse_answer(text, lenient=False) == gp.GraderAnswer(met=True, explanation="Named.")


@pytest.mark.parametrize(
    "text",
    [
        f"Here is my judgement.\n{VERDICT}",  # text around the JSON
        f"```\n{VERDICT}\n```",  # a fence without "json"
        f'{{"criteria_met": false}}\n{VERDICT}',  # two objects
        '["criteria_met"]',  # not an object
    ],
)
def test_not_lenient_anything_else_is_asked_again_as_the_reference_asks_again(text):
    with pytest.raises(gp.MalformedAnswer):
        gp.parse_answer(text, lenient=False)
    assert gp.parse_answer(text.replace('["criteria_met"]', VERDICT)).met in (True, False)
