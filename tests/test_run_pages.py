"""The grading run pages: who may use them, the launch form (estimate first), the run page's
htmx progress fragment, cancelling, and CSRF on every form."""

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotation.models import Physician
from grading.models import Endpoint, Run, RunBatch
from grading.pipeline.batches import batch_run
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run

pytest_plugins = ["tests.llm_server"]
pytestmark = pytest.mark.django_db


def make_user(role: str) -> User:
    user = User.objects.create_user(username=role, password="pw-for-tests")
    Physician.objects.create(user=user, role=role)
    return user


def client_for(role: str, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(make_user(role))
    return client


@pytest.fixture
def source() -> Run:
    return imported_run(name="imported", conversations=2, samples=2)


@pytest.fixture
def run(source, llm_server) -> Run:
    grader = endpoint_on(llm_server)
    return run_launch(spec=RunRequest(name="regrade", grader=grader, responses_from=source, concurrency=2))


def form_data(llm_server, **changes) -> dict:
    if not Endpoint.objects.filter(name="test-grader").exists():
        endpoint_on(llm_server)
    data = {
        "name": "from-the-page",
        "source": "responses",
        "responses_from": str(Run.objects.get(name="imported").code),
        "samples": "1",
        "grader": "test-grader",
        "concurrency": "8",
        "use_cache": "on",
    }
    return {**data, **changes}


# --- who may use them ---------------------------------------------------------------------------


def page_urls(run: Run) -> list[str]:
    return [reverse("run_list"), reverse("run_new"), reverse("run_detail", args=[run.code])]


@pytest.mark.parametrize("role", [Physician.Role.RESEARCHER, Physician.Role.CURATOR])
def test_researchers_and_curators_open_the_run_pages(run, role):
    client = client_for(role)
    for url in page_urls(run):
        assert client.get(url).status_code == 200, url


def test_physicians_are_refused_every_run_page_and_the_cancel(run):
    client = client_for(Physician.Role.PHYSICIAN)
    for url in page_urls(run):
        assert client.get(url).status_code == 403, url
    assert client.post(reverse("run_cancel", args=[run.code])).status_code == 403
    assert client.post(reverse("run_new"), {}).status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_visitors_are_sent_to_the_login_page(run, client):
    for url in page_urls(run):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("login")), url


def test_an_unknown_run_is_not_found():
    client = client_for(Physician.Role.RESEARCHER)
    assert client.get(reverse("run_detail", args=["00000000-0000-0000-0000-000000000000"])).status_code == 404


# --- launching ------------------------------------------------------------------------------------


def test_the_estimate_comes_before_the_launch(source, llm_server):
    client = client_for(Physician.Role.RESEARCHER)
    page = client.get(reverse("run_new")).content.decode()
    assert 'value="estimate"' in page
    assert 'value="launch"' not in page
    response = client.post(reverse("run_new"), {**form_data(llm_server), "action": "estimate"})
    page = response.content.decode()
    assert "Grading: 20 grader calls on 4 responses" in page
    assert 'value="launch"' in page
    assert not Run.objects.filter(name="from-the-page").exists()


def test_launching_creates_the_run_and_opens_its_page(source, llm_server, django_capture_on_commit_callbacks):
    client = client_for(Physician.Role.RESEARCHER)
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(reverse("run_new"), {**form_data(llm_server), "action": "launch"})
    run = Run.objects.get(name="from-the-page")
    assert response.status_code == 302
    assert response["Location"] == reverse("run_detail", args=[run.code])
    assert (run.total_items, run.concurrency, run.use_cache, run.responses_from) == (20, 8, True, source)
    assert len(queued) == run.batches.count()


def test_the_estimate_fragment_answers_htmx_and_launches_nothing(source, llm_server):
    client = client_for(Physician.Role.RESEARCHER)
    response = client.post(
        reverse("run_new"), {**form_data(llm_server), "action": "launch"}, headers={"HX-Request": "true"}
    )
    page = response.content.decode()
    assert "<html" not in page
    assert "Grading: 20 grader calls" in page
    assert not Run.objects.filter(name="from-the-page").exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"source": "sample"}, "Sampling needs a policy endpoint."),
        ({"grader": "nope"}, "Select a valid choice"),
        ({"name": "imported"}, "A run named &#x27;imported&#x27; already exists"),
        ({"grader_template": "no placeholders here"}, "lacks the placeholder"),
        ({"responses_from": ""}, "Choose the run whose responses to grade."),
        # PostgreSQL text cannot hold NUL: the form must refuse it, not fail on the lookup.
        ({"source": "sample", "subset": "mine\x00"}, "Null characters are not allowed"),
        ({"name": "nul\x00name"}, "Null characters are not allowed"),
    ],
)
def test_a_bad_launch_says_what_is_wrong(source, llm_server, changes, message):
    client = client_for(Physician.Role.RESEARCHER)
    response = client.post(reverse("run_new"), {**form_data(llm_server, **changes), "action": "launch"})
    assert response.status_code == 200
    assert message in response.content.decode()
    assert Run.objects.count() == 1


def test_the_sampling_choice_launches_a_sampled_run(llm_server, django_capture_on_commit_callbacks):
    from tests.grading_data import conversation_with_rubric, subset_of

    imported_run(name="imported", conversations=1)
    subset = subset_of("mine", [conversation_with_rubric(9, n_criteria=2)])
    client = client_for(Physician.Role.CURATOR)
    endpoint_on(llm_server, "test-policy", model="policy-1")
    data = form_data(llm_server, source="sample", subset=str(subset.code), policy="test-policy", samples="3")
    with django_capture_on_commit_callbacks():
        response = client.post(reverse("run_new"), {**data, "action": "launch"})
    assert response.status_code == 302
    run = Run.objects.get(name="from-the-page")
    assert (run.policy_model, run.samples, run.subset.name, run.total_items) == ("policy-1", 3, "mine", 6)


# --- watching --------------------------------------------------------------------------------------


def test_the_run_page_polls_its_progress_fragment_every_two_seconds(run):
    client = client_for(Physician.Role.RESEARCHER)
    page = client.get(reverse("run_detail", args=[run.code])).content.decode()
    assert 'id="progress"' in page
    assert f'hx-get="{reverse("run_detail", args=[run.code])}"' in page
    assert 'hx-trigger="every 2s"' in page
    assert "Cancel run" in page


def test_htmx_gets_only_the_progress_fragment_with_its_figures(run, django_assert_max_num_queries):
    batch_run(batch_id=run.batches.order_by("number").values_list("id", flat=True)[0])
    client = client_for(Physician.Role.RESEARCHER)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("run_detail", args=[run.code]), headers={"HX-Request": "true"})
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<section id="progress"')
    assert "<html" not in fragment
    done = Run.objects.get(id=run.id).grades.count()
    assert f"{done} of 20" in fragment
    assert re.search(rf'<th>Remaining</th><td class="num">\s*{20 - done}\s*<', fragment)
    assert "grades/s" in fragment
    assert "prompt" in fragment
    assert "Reused" in fragment
    assert f'<progress max="20" value="{done}"' in fragment


def test_a_finished_run_stops_polling_and_links_its_report(run):
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    client = client_for(Physician.Role.RESEARCHER)
    fragment = client.get(reverse("run_detail", args=[run.code]), headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in fragment
    assert "Cancel run" not in fragment
    assert reverse("report_detail", args=[run.code]) in fragment


def test_the_cancel_button_cancels_the_run(run):
    client = client_for(Physician.Role.RESEARCHER)
    response = client.post(reverse("run_cancel", args=[run.code]), follow=True)
    assert response.status_code == 200
    assert "Cancelled regrade" in response.content.decode()
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert set(run.batches.values_list("status", flat=True)) == {RunBatch.Status.CANCELLED}


def test_cancel_answers_only_post(run):
    client = client_for(Physician.Role.RESEARCHER)
    assert client.get(reverse("run_cancel", args=[run.code])).status_code == 405


# --- CSRF --------------------------------------------------------------------------------------------


def csrf_token(client: Client, url: str) -> str:
    page = client.get(url).content.decode()
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def test_the_launch_form_needs_its_csrf_token(source, llm_server):
    client = client_for(Physician.Role.RESEARCHER, enforce_csrf_checks=True)
    data = {**form_data(llm_server), "action": "estimate"}
    assert client.post(reverse("run_new"), data).status_code == 403
    token = csrf_token(client, reverse("run_new"))
    assert client.post(reverse("run_new"), {**data, "csrfmiddlewaretoken": token}).status_code == 200
    # htmx sends the token in the header that base.html sets on <body>.
    assert (
        client.post(reverse("run_new"), data, headers={"HX-Request": "true", "X-CSRFToken": token}).status_code == 200
    )


def test_the_cancel_form_needs_its_csrf_token(run):
    client = client_for(Physician.Role.RESEARCHER, enforce_csrf_checks=True)
    url = reverse("run_cancel", args=[run.code])
    assert client.post(url).status_code == 403
    token = csrf_token(client, reverse("run_detail", args=[run.code]))
    assert client.post(url, {"csrfmiddlewaretoken": token}).status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED


def test_the_form_launches_a_healthbench_professional_run(source, llm_server, django_capture_on_commit_callbacks):
    client = client_for(Physician.Role.RESEARCHER)
    data = form_data(llm_server, healthbench_professional="on")
    with django_capture_on_commit_callbacks():
        response = client.post(reverse("run_new"), {**data, "action": "launch"})
    assert response.status_code == 302
    run = Run.objects.get(name="from-the-page")
    assert run.healthbench_professional
    assert run.scores_length_adjusted
    assert "HealthBench Professional run" in client.get(reverse("run_new")).content.decode()


# --- endpoints, failures and money ----------------------------------------------------------------


def test_a_form_post_naming_a_url_or_key_variable_is_refused_with_what_to_do(source, llm_server):
    client = client_for(Physician.Role.RESEARCHER)
    data = {
        **form_data(llm_server),
        "grader_base_url": "http://attacker.example/v1",
        "grader_api_key_env": "SECRET_KEY",
    }
    response = client.post(reverse("run_new"), {**data, "action": "launch"})
    assert response.status_code == 400
    assert "name a grader endpoint" in response.content.decode()
    assert Run.objects.count() == 1
    assert llm_server.calls == 0


def test_a_failed_run_shows_a_banner_with_its_reason(run):
    Run.objects.filter(id=run.id).update(status=Run.Status.FAILED, error="grader endpoint x: connection refused by y")
    page = client_for(Physician.Role.RESEARCHER).get(reverse("run_detail", args=[run.code])).content.decode()
    assert 'class="banner error"' in page
    assert "This run failed." in page
    assert "connection refused by y" in page
    assert "grade --resume regrade" in page


def test_a_done_run_with_failures_shows_a_warning_and_the_cost(llm_server):
    from decimal import Decimal

    from tests.grading_data import imported_run as make

    faulty = make(name="faulty", conversations=1, samples=1, n_criteria=2, faults={1: "malformed:9"})
    grader = endpoint_on(llm_server, "priced", price_input=Decimal(2), price_output=Decimal(8))
    run = run_launch(spec=RunRequest(name="warned", grader=grader, responses_from=faulty))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    page = client_for(Physician.Role.RESEARCHER).get(reverse("run_detail", args=[run.code])).content.decode()
    assert "Done, with failures." in page
    assert "1 of 2 grades failed" in page
    assert re.search(r"<th>Cost</th><td class=\"num\">\$0\.\d\d</td>", page)


def test_the_estimate_on_the_page_gives_dollars_or_says_prices_are_missing(source, llm_server):
    client = client_for(Physician.Role.RESEARCHER)
    page = client.post(reverse("run_new"), {**form_data(llm_server), "action": "estimate"}).content.decode()
    assert "Cost: unknown — no prices are configured for test-grader" in page
