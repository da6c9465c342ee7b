"""Meta-evaluation pages: who may read them, what they show, the downloads, the query count."""

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Physician
from grading.metaeval.grader_labels import grader_labels_import
from grading.metaeval.importer import meta_eval_import
from grading.models import Run
from tests.metaeval_rows import CATEGORY, OTHER_CATEGORY, grader_rows_for, lines, meta_row

pytestmark = pytest.mark.django_db

# Session (in the database), user, the user's physician profile, the run, then labels (a count
# and the rows), catalogue names, physician names, grades, and the "can't judge" answers (their
# fingerprint and their count): the same whatever the number of items.
REPORT_QUERIES = 11


def _user(username: str, role: str) -> User:
    user = User.objects.create_user(username)
    Physician.objects.create(user=user, role=role)
    return user


@pytest.fixture
def researcher():
    return _user("researcher", Physician.Role.RESEARCHER)


@pytest.fixture
def curator():
    return _user("curator", Physician.Role.CURATOR)


@pytest.fixture
def physician_user():
    return _user("doctor", Physician.Role.PHYSICIAN)


def make_run(name="grader-a", n_items=12, start=0) -> Run:
    """n_items labelled items over two criteria, with both verdicts from grader and physicians in each."""
    rows = [
        meta_row(
            f"p-{i % 4}",
            f"c-{i}",
            (CATEGORY, OTHER_CATEGORY)[i % 2],
            labels=(i % 2 == 1, i % 3 == 0, True),
            physicians=(i % 5, i % 5 + 1, 9),
            prompt=[{"content": f"Question {i % 4}?", "role": "user"}],
        )
        for i in range(start, start + n_items)
    ]
    meta_eval_import(lines=lines(*rows))
    return grader_labels_import(
        lines=lines(*grader_rows_for(rows, [i % 4 < 2 for i in range(n_items)])), run_name=name
    ).run


def _urls(run: Run) -> list[str]:
    query = f"?run={run.code}"
    return [
        reverse("metaeval_runs"),
        reverse("metaeval_report") + query,
        reverse("metaeval_disagreements") + query,
        reverse("metaeval_download", args=["json"]) + query,
        reverse("metaeval_download", args=["csv"]) + query,
    ]


def test_anonymous_visitors_are_sent_to_the_login_page(client):
    for url in _urls(make_run()):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login")), url


def test_physicians_are_refused(client, physician_user):
    client.force_login(physician_user)
    for url in _urls(make_run()):
        assert client.get(url).status_code == 403, url


@pytest.mark.parametrize("role", ["researcher", "curator"])
def test_researchers_and_curators_read_every_page(client, request, role):
    client.force_login(request.getfixturevalue(role))
    for url in _urls(make_run()):
        assert client.get(url).status_code == 200, url


def test_the_run_list_shows_only_runs_that_graded_labelled_items(client, researcher):
    run = make_run()
    Run.objects.create(plan=Run.Plan.STORED, name="unrelated-run")
    client.force_login(researcher)
    page = client.get(reverse("metaeval_runs")).content.decode()
    assert run.name in page
    assert f"?run={run.code}" in page
    assert "unrelated-run" not in page


def test_the_report_shows_each_consensus_criterion_with_interval_rank_and_strip(client, researcher):
    run = make_run()
    client.force_login(researcher)
    page = client.get(reverse("metaeval_report"), {"run": run.code}).content.decode()
    for scope in ("Overall", CATEGORY.removeprefix("cluster:"), OTHER_CATEGORY.removeprefix("cluster:")):
        assert scope in page
    assert page.count('role="img"') == 3  # one strip per row
    assert "<polygon" in page  # the grader's marker
    assert " of " in page  # a rank


def test_the_report_puts_several_runs_side_by_side(client, researcher):
    first = make_run("grader-a")
    second = make_run("grader-b", n_items=6, start=100)
    client.force_login(researcher)
    page = client.get(reverse("metaeval_report") + f"?run={first.code}&run={second.code}").content.decode()
    assert page.index("grader-a") < page.index("grader-b")
    assert page.count("<polygon") >= 4  # two lanes per row where both runs have a value


def test_an_unknown_or_malformed_run_is_not_found(client, researcher):
    client.force_login(researcher)
    assert client.get(reverse("metaeval_report"), {"run": "00000000-0000-4000-8000-000000000000"}).status_code == 404
    assert client.get(reverse("metaeval_report"), {"run": "nope"}).status_code == 404


def test_comparing_with_nothing_ticked_stays_on_the_list_with_a_message(client, researcher):
    client.force_login(researcher)
    response = client.get(reverse("metaeval_report"), follow=True)
    assert response.redirect_chain == [(reverse("metaeval_runs"), 302)]
    assert "Tick at least one run to compare" in response.content.decode()


def test_too_many_runs_at_once_goes_back_to_the_list_with_a_message(client, researcher):
    runs = [Run.objects.create(plan=Run.Plan.STORED, name=f"r{i}") for i in range(7)]
    client.force_login(researcher)
    url = reverse("metaeval_report") + "?" + "&".join(f"run={r.code}" for r in runs)
    response = client.get(url, follow=True)
    assert response.redirect_chain == [(reverse("metaeval_runs"), 302)]
    assert "Tick at most 6 runs" in response.content.decode()


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_the_downloads_hold_exactly_what_the_command_prints(client, researcher, fmt):
    run = make_run()
    client.force_login(researcher)
    response = client.get(reverse("metaeval_download", args=[fmt]), {"run": run.code})
    out = StringIO()
    call_command("meta_eval", run.name, format=fmt, stdout=out)
    assert response.content.decode() == out.getvalue()
    assert response["Content-Disposition"] == f'attachment; filename="meta-eval-grader-a.{fmt}"'


def test_the_report_page_query_count_does_not_grow_with_the_data(client, researcher, django_assert_max_num_queries):
    small = make_run("small", n_items=4)
    large = make_run("large", n_items=120, start=1000)
    client.force_login(researcher)
    for run in (small, large):
        with django_assert_max_num_queries(REPORT_QUERIES):
            assert client.get(reverse("metaeval_report"), {"run": run.code}).status_code == 200


def test_the_disagreement_browser_shows_transcript_criterion_explanation_and_tally(client, researcher):
    run = make_run()
    client.force_login(researcher)
    page = client.get(reverse("metaeval_disagreements"), {"run": run.code}).content.decode()
    assert "Question" in page  # the transcript
    assert "the graded response" in page
    assert "as physicians agreed it should" in page  # the criterion text
    assert "The grader thinks the criterion is" in page  # the explanation
    assert " met · <strong>" in page  # the tally, never the physicians' names
    assert "test-physician" not in page


def test_the_disagreement_browser_pages_through_htmx_fragments(client, researcher):
    run = make_run(n_items=60)
    client.force_login(researcher)
    url = reverse("metaeval_disagreements")
    full = client.get(url, {"run": run.code}).content.decode()
    assert "Page 1 of" in full
    assert "<html" in full
    fragment = client.get(url, {"run": run.code, "page": 2}, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in fragment
    assert fragment.lstrip().startswith('<div id="disagreements"')
    assert "Page 2 of" in fragment


def test_the_disagreement_browser_filters_by_criterion_and_shows_ties(client, researcher):
    run = make_run(n_items=30)
    client.force_login(researcher)
    url = reverse("metaeval_disagreements")
    page = client.get(url, {"run": run.code, "category": OTHER_CATEGORY}).content.decode()
    assert f"<code>{CATEGORY.removeprefix('cluster:')}</code></h2>" not in page
    ties = client.get(url, {"run": run.code, "show": "ties"}).content.decode()
    assert "Physician ties" in ties


def test_the_report_page_and_the_api_show_kappa_and_alpha(client, researcher):
    from rest_framework.authtoken.models import Token

    from grading.metaeval.report import run_meta_eval_report

    run = make_run()
    client.force_login(researcher)
    response = client.get(reverse("metaeval_report"), {"run": run.code})
    page = response.content.decode()
    assert "κ [95% CI]" in page
    assert "Physicians' α [95% CI]" in page
    document = run_meta_eval_report(run=run)
    kappa = document["cohen_kappa"]["cohen_kappa"]["value"]
    assert (f"{kappa:.3f}" if kappa is not None else "undefined") in page
    token = Token.objects.create(user=researcher)
    api = client.get(f"/api/runs/{run.name}/meta-eval/", HTTP_AUTHORIZATION=f"Token {token.key}").json()
    assert api["cohen_kappa"] == document["cohen_kappa"]
    assert api["krippendorff_alpha"] == document["krippendorff_alpha"]
