"""The new-run form shows every error beside its field and only the fields of the chosen source."""

import re

import pytest
from django.urls import reverse

from annotation.models import Physician
from tests.grading_data import imported_run
from tests.test_run_pages import client_for, form_data

pytest_plugins = ["tests.llm_server"]
pytestmark = pytest.mark.django_db


def test_estimating_the_empty_form_puts_each_error_beside_its_field():
    client = client_for(Physician.Role.RESEARCHER)
    page = client.post(reverse("run_new"), {"action": "estimate"}, headers={"HX-Request": "true"}).text
    # htmx gets the whole form back, not just the estimate box.
    assert "<html" not in page
    assert 'id="run-form"' in page
    assert "things to fix" in page
    name_field = page[page.index('name="name"') - 600 : page.index('name="name"') + 200]
    assert "This field is required." in name_field
    grader_field = page[page.index('name="grader"') - 600 : page.index('name="grader"') + 200]
    assert "This field is required." in grader_field
    assert "see the messages beside them" not in page
    # The summary at the top links to each field.
    assert 'href="#id_name"' in page
    assert 'href="#id_grader"' in page


def test_policy_fields_are_marked_for_the_sampling_source_only():
    page = client_for(Physician.Role.RESEARCHER).get(reverse("run_new")).text
    # The subset is also the physicians' responses' (grading them needs one too).
    for name, sources in (("policy", "sample"), ("samples", "sample"), ("subset", "sample physician")):
        assert re.search(rf'data-source="{sources}">\s*<div[^>]*>\s*<label for="id_{name}"', page) or re.search(
            rf'data-source="{sources}">.{{0,400}}id="id_{name}"', page, re.S
        ), name
    assert re.search(r'data-source="responses">.{0,400}id="id_responses_from"', page, re.S)


def test_a_valid_estimate_still_comes_back_in_the_form(llm_server):
    imported_run(name="imported", conversations=2, samples=2)
    client = client_for(Physician.Role.RESEARCHER)
    page = client.post(
        reverse("run_new"), {**form_data(llm_server), "action": "estimate"}, headers={"HX-Request": "true"}
    ).text
    assert "Grading: 20 grader calls" in page
    assert "things to fix" not in page


def test_cross_field_errors_sit_beside_their_fields_on_the_first_submit(llm_server):
    imported_run(name="imported", conversations=1, samples=1)
    client = client_for(Physician.Role.RESEARCHER)
    data = {**form_data(llm_server), "name": "imported", "source": "sample", "subset": "", "action": "estimate"}
    data.pop("policy", None)
    page = client.post(reverse("run_new"), data, headers={"HX-Request": "true"}).text

    def beside(name: str) -> str:
        at = page.index(f'name="{name}"')
        return page[at - 700 : at + 300]

    assert "A run named &#x27;imported&#x27; already exists" in beside("name")
    assert "Sampling needs a policy endpoint." in beside("policy")
    assert "Sampling needs a subset." in beside("subset")
    # The heading counts the lines of the list under it.
    summary = page[page.index("form-errors") : page.index("</section>")]
    assert "3 things to fix" in summary
    assert summary.count("<li>") == 3
