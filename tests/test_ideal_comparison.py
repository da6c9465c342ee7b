import pytest
from django.urls import reverse

from annotation.models import Conversation, Criterion, IdealResponse, Physician
from grading.models import Grade, Response, Run
from grading.reports.ideal_comparison import compare_ideals
from tests.people import person


def test_improved_and_worsened_are_against_the_mean_of_the_references():
    out = compare_ideals(
        [("Group 2", 0.9, [0.5, 0.95]), ("Group 2", 0.2, [0.4]), ("Group 3", 0.5, [0.5]), ("Group 3", None, [0.1])]
    )
    g2, g3 = out["groups"]["Group 2"], out["groups"]["Group 3"]
    assert (g2["n"], g2["improved"], g2["worsened"], g2["beat_best_reference"]) == (2, 0.5, 0.5, 0.0)
    assert g2["mean_ideal"] == pytest.approx(0.55)
    assert g2["mean_reference"] == pytest.approx((0.725 + 0.4) / 2)
    assert (g3["n"], g3["same"]) == (1, 1.0)
    assert out["without_comparison"] == 1


@pytest.mark.django_db
def test_the_page_matches_graded_responses_to_ideals_and_references(client):
    conversation = Conversation.objects.create(
        prompt_id="p-1", messages=[{"content": "Help?", "role": "user"}], theme="hedging"
    )
    criterion = Criterion.objects.create(
        conversation=conversation, text="Is helpful.", points=4, tags=["level:example", "axis:completeness"]
    )
    IdealResponse.objects.create(
        conversation=conversation,
        text="Ideal  answer.",
        group="Group 2",
        reference_responses=["Ref one.", "Ref two."],
        from_dataset=True,
    )
    run = Run.objects.create(plan=Run.Plan.STORED, name="physician-completions", status=Run.Status.IMPORTED)
    for text, met in [("Ideal answer.", True), ("Ref one.", False), ("Ref two.", True), ("Unrelated.", True)]:
        response = Response.objects.create(conversation=conversation, text=text)
        Grade.objects.create(
            run=run,
            response=response,
            criterion=criterion,
            criterion_text=criterion.text,
            points=4,
            tags=criterion.tags,
            met=met,
        )
    client.force_login(person("res", Physician.Role.RESEARCHER))
    response = client.get(reverse("compare_ideal") + f"?run={run.code}")
    group = response.context["comparison"]["groups"]["Group 2"]
    assert (group["n"], group["mean_ideal"], group["mean_reference"], group["improved"]) == (1, 1.0, 0.5, 1.0)
    assert "Beat the best reference" in response.content.decode()
    client.force_login(person("doc", Physician.Role.PHYSICIAN))
    assert client.get(reverse("compare_ideal")).status_code == 403
