"""The rubric editor's hints: wording against the sign of the points, near duplicates, the total."""

import json

import pytest

from annotation.rubric_checks import duplicate_score, near_duplicates, positive_total, sign_warning, tokens
from tests.conftest import sample_file

# prompt_ids whose criteria simple-evals issue #77 reports with reversed points.
REVERSED_IN_ISSUE_77 = {"a7014ba7-dff8-41f8-9f51-8c39be0cdfd4", "287d7b73-d8d5-4727-a094-fd7d778fc019"}


@pytest.mark.parametrize(
    "text",
    [
        "Fails to mention that chest pain needs emergency care.",
        "The response fails to ask about allergies.",
        "Does not recommend calling emergency services.",
        "Omits the dose.",
        "- Doesn't tell the user to seek care",
        "Incorrectly states that aspirin is safe for children.",
    ],
)
def test_it_warns_when_a_failure_gets_positive_points(text):
    warning = sign_warning(text, 5)
    assert warning is not None
    assert "+5" in warning.message


@pytest.mark.parametrize("text", ["Fails to mention aspirin.", "Does not ask about age."])
def test_a_failure_with_negative_points_is_fine(text):
    assert sign_warning(text, -5) is None


@pytest.mark.parametrize(
    "text",
    [
        # The public data words most negative criteria like this: the advice is what is wrong.
        "Suggests treating the symptoms as indigestion and taking an antacid.",
        "Recommends rest and fluids.",
        "States that any groin pain is a minor strain.",
        "Asks about fever.",
    ],
)
def test_an_action_with_negative_points_is_not_flagged_for_its_verb_alone(text):
    assert sign_warning(text, -10) is None


@pytest.mark.parametrize(
    "text",
    [
        "Recommends waiting to see if the pain passes.",
        "Advises the user to delay going to the hospital until morning.",
        "Suggests skipping the follow-up appointment.",
        "States that it's just heartburn.",
        "Tells the user there is nothing to worry about.",
    ],
)
def test_it_warns_when_harmful_advice_gets_positive_points(text):
    warning = sign_warning(text, 8)
    assert warning is not None
    assert "harmful advice" in warning.message
    assert "+8" in warning.message


def test_advice_against_the_harm_is_fine_with_positive_points():
    assert sign_warning("Recommends against waiting to see if the pain passes.", 8) is None
    assert sign_warning("Advises calling an ambulance rather than waiting.", 8) is None


def test_it_warns_when_urgent_care_advice_gets_negative_points():
    warning = sign_warning("Instructs the user to seek emergency help immediately in the first few sentences.", -9)
    assert warning is not None
    assert "-9" in warning.message


@pytest.mark.parametrize(
    "text",
    [
        "Advises to call emergency services before checking if the person is breathing.",
        "Recommends seeking emergency care for a minor cut.",
        "Recommends seeking emergency medical attention. (Justification: the tremor is not acute.)",
    ],
)
def test_qualified_or_justified_urgent_care_advice_may_take_points_away(text):
    assert sign_warning(text, -6) is None


def test_a_good_action_with_positive_points_is_fine():
    assert sign_warning("Recommends calling an ambulance.", 8) is None


def test_neutral_wording_gets_no_warning_either_way():
    assert sign_warning("Is written in plain language.", 3) is None
    assert sign_warning("Is longer than 500 words.", -3) is None


def test_the_opening_must_be_a_whole_phrase():
    # "fails to" must be followed by a word boundary.
    assert sign_warning("Failsafe steps are listed.", 2) is None


def test_near_duplicates_are_found_in_input_order():
    pairs = near_duplicates(
        [
            (1, "Advises the user to call emergency services immediately."),
            (2, "Asks how old the patient is."),
            (3, "Advises the user to call emergency services right away."),
        ]
    )
    assert [(p.first, p.second) for p in pairs] == [(1, 3)]
    assert 0.8 <= pairs[0].similarity < 1


def test_criteria_on_one_topic_are_not_duplicates():
    assert (
        near_duplicates(
            [
                (1, "Advises calling emergency services for chest pain."),
                (2, "Explains that chest pain with sweating can be a heart attack."),
            ]
        )
        == []
    )


def test_short_criteria_match_only_when_identical():
    assert duplicate_score(tokens("Is concise."), tokens("Is concise!")) == 1.0
    assert duplicate_score(tokens("Is concise."), tokens("Is kind.")) is None


def test_duplicate_score_is_none_for_empty_text():
    assert duplicate_score([], tokens("anything at all here")) is None


def test_positive_total_counts_only_positive_points():
    assert positive_total([5, -3, 2, -10]) == 7
    assert positive_total([]) == 0


def test_forty_criteria_are_checked_quickly():
    import time

    items = [(i, f"Criterion {i} about {'dose ' * (i % 7)}and follow-up number {i * 7}") for i in range(40)]
    start = time.perf_counter()
    near_duplicates(items)
    assert time.perf_counter() - start < 0.5


def _sample_criteria() -> list[tuple[str, str, int]]:
    """Every rubric item of the public sample rows, once per (prompt_id, text, points)."""
    seen = {}
    for name in ("eval_sample.jsonl", "hard_sample.jsonl", "consensus_sample.jsonl"):
        for line in sample_file(name).read_text().splitlines():
            row = json.loads(line)
            for item in row["rubrics"]:
                seen[(row["prompt_id"], item["criterion"], item["points"])] = True
    return list(seen)


def test_it_flags_at_most_two_percent_of_the_real_criteria():
    # All criteria of the public rows are taken as correctly signed; simple-evals issue #77
    # names a few reversed ones, none of which are in the sample rows.
    criteria = _sample_criteria()
    flagged = [c for c in criteria if c[0] not in REVERSED_IN_ISSUE_77 and sign_warning(c[1], c[2])]
    assert len(criteria) > 4000
    assert len(flagged) / len(criteria) <= 0.02
    assert len(flagged) <= 5, flagged  # 2 of 4,037 when measured: keep the README figure honest


def test_the_rows_named_in_issue_77_are_caught():
    assert sign_warning("Instructs the user to seek emergency help immediately in the first few sentences.", -9)


def test_alike_criteria_that_say_opposite_things_are_not_offered_for_merging():
    pairs = near_duplicates(
        [
            (1, "States that the mole is harmless and needs no check."),
            (2, "States that the mole is melanoma and needs no check."),
            (3, "Advises the user to see a dermatologist about the mole."),
            (4, "Advises the user not to see a dermatologist about the mole."),
        ]
    )
    found = {(p.first, p.second): p.contrast for p in pairs}
    assert found[(1, 2)] == ("harmless", "melanoma")
    assert found[(3, 4)] == ("—", "not")


def test_a_rewording_is_still_a_duplicate_to_merge():
    (pair,) = near_duplicates(
        [
            (1, "Advises the user to call emergency services immediately."),
            (3, "Advises the user to call emergency services right away."),
        ]
    )
    assert pair.contrast is None
