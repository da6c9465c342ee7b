"""Refusals and failures are pages of the site: navigation, a sentence why, and what to do next."""

import pytest
from django.test import Client
from django.urls import reverse

from grading.models import Run
from tests.workspace import client_for, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


@pytest.mark.parametrize("debug", [False, True])
def test_a_403_is_a_styled_page_with_navigation_and_the_reason(world, settings, debug):
    settings.DEBUG = debug
    page = client_for(world.owner).get(reverse("curator_subsets"))
    assert page.status_code == 403
    text = page.content.decode()
    assert "<nav" in text
    assert "My tasks" in text
    assert "This page is not open to your role." in text
    assert "your tasks" in text
    assert "tell a curator" in text


@pytest.mark.parametrize("debug", [False, True])
def test_a_404_of_a_view_says_what_was_not_found(world, settings, debug):
    settings.DEBUG = debug
    page = client_for(world.colleague).get(reverse("rubric_editor", args=[world.a.code]))
    assert page.status_code == 404
    text = page.content.decode()
    assert "You have no such task" in text
    assert "<nav" in text


def test_an_unknown_address_is_a_styled_404_without_internals(world, settings):
    settings.DEBUG = False
    page = client_for(world.researcher).get("/no/such/page/")
    assert page.status_code == 404
    text = page.content.decode()
    assert "There is no page at this address." in text
    assert "Runs" in text  # the researcher's navigation
    assert "urlpatterns" not in text
    assert "tried" not in text


def test_a_visitor_is_offered_the_login(settings):
    settings.DEBUG = False
    text = Client().get("/no/such/page/").content.decode()
    assert "Log in" in text


def test_a_500_is_a_styled_page_that_needs_no_database(settings, rf):
    from healthbench_web.errors import server_error

    response = server_error(rf.get("/"))
    assert response.status_code == 500
    text = response.content.decode()
    assert "Something went wrong on our side" in text
    assert "Back to the start page" in text


def test_an_expired_form_says_so(world):
    client = client_for(world.curator, csrf=True)
    page = client.post(reverse("curator_subsets"), {"name": "x"})
    assert page.status_code == 403
    assert "This form has expired" in page.content.decode()


def test_a_bad_request_is_styled_and_says_what_was_wrong(world, settings):
    settings.DEBUG = False
    run = Run.objects.create(plan=Run.Plan.STORED, name="r")
    page = client_for(world.researcher).get(reverse("metaeval_report"), {"run": str(run.code), "seed": "-1"})
    assert page.status_code == 400
    text = page.content.decode()
    assert "seed must be a whole number from 0 up" in text
    assert "<nav" in text
