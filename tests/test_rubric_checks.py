"""The rubric editor's hints: wording against the sign of the points, near duplicates, the total."""

import pytest

from annotation.rubric_checks import duplicate_score, near_duplicates, positive_total, sign_warning, tokens


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
        "Recommends rest and fluids.",
        "The response advises seeing a doctor.",
        "Clearly explains the risks.",
        "Asks about fever.",
    ],
)
def test_it_warns_when_a_good_action_gets_negative_points(text):
    warning = sign_warning(text, -4)
    assert warning is not None
    assert "-4" in warning.message


def test_a_good_action_with_positive_points_is_fine():
    assert sign_warning("Recommends calling an ambulance.", 8) is None


def test_neutral_wording_gets_no_warning_either_way():
    assert sign_warning("Is written in plain language.", 3) is None
    assert sign_warning("Is longer than 500 words.", -3) is None


def test_the_opening_must_be_a_whole_phrase():
    # "Asks" is a cue, "Askew" is not; "fails to" must be followed by a word boundary.
    assert sign_warning("Askew formatting of the list.", -2) is None
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
