"""The ideal-response editor and the condition it records."""

import pytest
from django.urls import reverse

from annotation.models import Assignment, IdealResponse
from tests.workspace import client_for, conversation, make_world, task

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


def test_with_references_the_assigned_references_are_shown(world):
    page = client_for(world.owner).get(reverse("ideal_editor", args=[world.a.code])).text
    for response in world.responses:
        assert response.text in page
    assert "Reference responses" in page


def test_saving_records_the_condition_and_the_references_shown(world):
    client = client_for(world.owner)
    response = client.post(
        reverse("ideal_editor", args=[world.a.code]), {"text": "Call an ambulance now; chew aspirin."}
    )
    assert response.status_code == 302
    ideal = IdealResponse.objects.get(author=world.owner)
    assert ideal.condition == IdealResponse.Condition.WITH_REFERENCE
    assert ideal.reference_responses == [r.text for r in world.responses]
    assert not ideal.from_dataset
    world.ideal_task.refresh_from_db()
    assert world.ideal_task.status == Assignment.Status.DONE


def test_saving_again_replaces_the_physicians_own_response(world):
    client = client_for(world.owner)
    client.post(reverse("ideal_editor", args=[world.a.code]), {"text": "First draft."})
    client.post(reverse("ideal_editor", args=[world.a.code]), {"text": "Second draft."})
    assert list(IdealResponse.objects.filter(author=world.owner).values_list("text", flat=True)) == ["Second draft."]
    assert "Second draft.</textarea>" in client.get(reverse("ideal_editor", args=[world.a.code])).text


def test_without_references_nothing_is_shown_and_nothing_recorded(world):
    conv = conversation("conv-noref")
    conv.responses.create(text="A MODEL RESPONSE", model_name="m")
    task(world.outsider, Assignment.Kind.IDEAL_RESPONSE, conv, condition=IdealResponse.Condition.NO_REFERENCE)
    client = client_for(world.outsider)
    page = client.get(reverse("ideal_editor", args=[conv.code])).text
    assert "A MODEL RESPONSE" not in page
    assert "No reference responses are shown" in page
    client.post(reverse("ideal_editor", args=[conv.code]), {"text": "Mine."})
    ideal = IdealResponse.objects.get(author=world.outsider)
    assert (ideal.condition, ideal.reference_responses) == (IdealResponse.Condition.NO_REFERENCE, [])


def test_an_empty_response_is_refused_beside_the_field(world):
    response = client_for(world.owner).post(reverse("ideal_editor", args=[world.a.code]), {"text": "  "})
    assert response.status_code == 200
    assert "Write the response you would give." in response.text
    assert not IdealResponse.objects.filter(author=world.owner).exists()


def test_the_editor_costs_a_fixed_number_of_queries(world, django_assert_max_num_queries):
    client = client_for(world.owner)
    # Plus, the first time a text is shown, one query for its rendered Markdown and one to store it.
    with django_assert_max_num_queries(11):
        assert client.get(reverse("ideal_editor", args=[world.a.code])).status_code == 200
