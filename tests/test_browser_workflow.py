"""Curators and researchers in Chromium at 1366 and 390 px, on the demo programme (`load_demo`).

Each test follows numbered points of the curators' and researchers' side: pages that say what
will happen before it happens (8: the assignment preview and its reasons, blinding through
assignments (13), subsets of every kind, freezing, the endpoint form), the run form (9), no page
wider than a phone (10), first use of the demo (11) and the disagreement review by cause (14);
plus the earlier rules: refusals are pages of the site, changes preview and undo, Back shows the
answer just given. Every page and state is checked for sideways scrolling and with axe-core
(tests/browser_walk.py); screenshots go to test-artifacts/workflow/.
"""

import json

import pytest
from django.contrib.auth.models import User

from annotation.models import Assignment, Conversation, Physician, Subset, SubsetMember
from grading.models import Endpoint, Run
from tests.browser_walk import PASSWORD, WIDTHS, browser_marks

pytest_plugins = ["tests.browser_walk"]
pytestmark = browser_marks


def _preview(curator, kind: str, per_item: str = "2"):
    page = curator.go("/curator/assignments/")
    page.select_option("#id_kind", kind)
    page.fill("#id_per_item", per_item)
    page.click("#assign-form button[type=submit]")
    page.wait_for_selector("#preview form button")
    curator.check(f"preview of {kind}")
    return page


@pytest.mark.parametrize("width", WIDTHS)
def test_8_13_the_assignment_preview_says_what_will_happen_before_assign(visit, width):
    curator = visit("curator", width)
    page = curator.go("/curator/assignments/")
    page.select_option("#id_kind", "ideal_response")
    assert page.locator("#id_condition").is_visible()
    page = _preview(curator, "label")
    preview = curator.text("#preview")
    # Before anything is created: the tasks per physician, and every item left short with its reason.
    assert "will be created over" in preview
    assert "physician2:" in preview
    assert "skipped physician, who still votes on its consensus criteria" in preview
    assert "no consensus criterion is attached yet" in preview
    curator.shot("assign-preview")
    page.click("#preview form button")
    page.wait_for_selector("#messages li")
    message = curator.text("#messages")
    assert "tasks created over" in message
    assert "1 tasks" not in message
    assert "1 items" not in message
    # The form keeps its values, and the preview shows what is left.
    assert page.input_value("#id_kind") == "label"
    assert page.input_value("#id_per_item") == "2"
    page.wait_for_selector("#preview form button")
    curator.check("after assigning")

    # A rubric for labelers withdraws their labeling tasks; the table lists them ...
    page = _preview(curator, "rubric")
    page.click("#preview form button")
    page.wait_for_selector("#messages li")
    assert "were withdrawn, because nobody labels responses against a rubric they wrote" in curator.text("#messages")
    withdrawn = page.locator("#withdrawn tbody tr").count()
    assert withdrawn > 0
    curator.check("withdrawn tasks listed")
    # ... until their items are given to someone else.
    user = User.objects.create_user("physician3", password=PASSWORD)
    Physician.objects.create(user=user, role=Physician.Role.PHYSICIAN, status=Physician.Status.ACTIVE)
    page = _preview(curator, "label", per_item="1")
    page.click("#preview form button")
    page.wait_for_selector("#messages li")
    assert page.locator("#withdrawn tbody tr").count() < withdrawn
    curator.check("withdrawn tasks reassigned")


@pytest.mark.parametrize("width", WIDTHS)
def test_8_subsets_of_every_kind_and_a_freeze_that_asks_before_it_ends_the_undo(visit, width):
    curator = visit("curator", width)
    page = curator.go("/curator/subsets/")
    assert "Consensus: rebuilt from the consensus criteria attached" in curator.text()
    page.fill("#id_name", f"consensus-{width}")
    page.check("input[name=kind][value=consensus]")
    page.click("text=Create subset")
    page.wait_for_url(f"**/curator/subsets/consensus-{width}/")
    assert "(consensus)" in curator.text("h1")
    assert "If it only adds, it applies at once" in curator.text()
    curator.check("new consensus subset")
    page.click("text=Rebuild from attached consensus criteria")
    page.wait_for_selector("#messages li")
    assert "You can undo this until the next freeze" in curator.text("#messages")
    page.click("#freeze")
    page.wait_for_selector("#freeze-confirm")
    assert Subset.objects.get(name=f"consensus-{width}").versions.count() == 0
    curator.wait_focus("#freeze-confirm h3")
    curator.check("freeze asks first")
    curator.shot("freeze-confirm")
    page.click("#freeze-anyway")
    page.wait_for_selector("#messages li")
    assert "Frozen as version 1" in curator.text("#messages")

    # Removing members previews, confirms and undoes.
    hard = Subset.objects.create(name=f"hard-{width}", kind=Subset.Kind.HARD)
    SubsetMember.objects.bulk_create([SubsetMember(subset=hard, conversation=c) for c in Conversation.objects.all()])
    before = list(hard.members.order_by("id").values_list("conversation_id", flat=True))
    page = curator.go(f"/curator/subsets/hard-{width}/")
    page.select_option("#id_runs", "demo-run")
    page.fill("#id_n", "3")
    page.click("#hard-build button[type=submit]")
    page.wait_for_selector("#preview")
    assert f"remove {len(before) - 3}" in curator.text("#preview")
    assert hard.members.count() == len(before)
    curator.check("hard build preview")
    page.click("#confirm")
    page.wait_for_selector("#messages li")
    assert hard.members.count() == 3
    page.click("#undo")
    page.wait_for_selector("#messages li")
    assert list(hard.members.order_by("id").values_list("conversation_id", flat=True)) == before
    curator.check("undone")


@pytest.mark.parametrize("width", WIDTHS)
def test_8_the_endpoint_form_refuses_a_temperature_on_a_reasoning_model(visit, width):
    curator = visit("curator", width)
    page = curator.go("/endpoints/new/")
    name_border = page.eval_on_selector("#id_name", "e => getComputedStyle(e).borderTopColor")
    assert page.eval_on_selector("#id_base_url", "e => getComputedStyle(e).borderTopColor") == name_border
    page.fill("#id_name", f"o-grader-{width}")
    page.fill("#id_model", "o4-mini")
    page.check("#id_reasoning")
    page.fill("#id_temperature", "0.7")
    page.click("button:has-text('Save')")
    page.wait_for_selector(".form-errors")
    assert "Reasoning models take no temperature" in curator.text(".form-errors")
    field = page.locator(".errorlist", has_text="Reasoning models take no temperature")
    assert field.count() == 1
    assert field.is_visible()
    assert not Endpoint.objects.filter(name=f"o-grader-{width}").exists()
    curator.check("temperature refused")
    curator.shot("endpoint-form")
    page.fill("#id_temperature", "")
    page.uncheck("#id_reasoning")
    page.fill("#id_model", "gpt-5-mini")
    page.fill("#id_temperature", "0")
    page.click("button:has-text('Save')")
    page.wait_for_selector("#messages li")
    assert "looks like a reasoning model, but Reasoning is not ticked" in curator.text("#messages")
    curator.check("saved with a warning")


@pytest.mark.parametrize("width", WIDTHS)
def test_9_the_run_form_puts_every_error_beside_its_field_on_the_first_submit(visit, width):
    researcher = visit("researcher", width)
    page = researcher.go("/runs/new/")
    assert page.locator("#id_responses_from").is_visible()
    assert not page.locator("#id_policy").is_visible()
    page.fill("#id_name", "demo-run")
    page.check("input[name=source][value=sample]")
    assert page.locator("#id_policy").is_visible()
    assert not page.locator("#id_responses_from").is_visible()
    page.click("button[value=estimate]")
    page.wait_for_selector(".form-errors")
    for field, message in [
        ("#id_name", "A run named 'demo-run' already exists"),
        ("#id_policy", "Sampling needs a policy endpoint."),
        ("#id_subset", "Sampling needs a subset."),
        ("#id_grader", "This field is required."),
    ]:
        assert message in page.locator(".field", has=page.locator(field)).inner_text(), field
    heading = researcher.text(".form-errors h2")
    listed = page.locator(".form-errors li").count()
    assert heading.startswith(f"Nothing was estimated: {listed} things to fix")
    researcher.check("run form errors")
    researcher.shot("run-form")


@pytest.mark.parametrize("width", WIDTHS)
def test_10_11_first_use_every_page_fits_and_says_what_it_shows(visit, width):
    run = Run.objects.get(name="demo-run")
    physician = visit("physician", width)
    for kind in Assignment.Kind.values:
        assert "to do" in physician.text(f"#tasks-{kind}"), kind
    physician.shot("home")
    vote = Assignment.objects.filter(physician__user__username="physician", kind="consensus_vote").first()
    physician.go(f"/conversations/{vote.conversation.code}/votes/")
    physician.go("/conversations/new/")
    physician.go("/guidelines/")

    curator = visit("curator", width)
    nav = curator.page.locator("header.top nav")
    if width < 900:
        assert not nav.is_visible()
        curator.page.click(".menu-toggle")
        assert nav.is_visible()
        curator.check("menu open")
    else:
        assert nav.is_visible()
        assert not curator.page.locator(".menu-toggle").is_visible()
    curator.shot("home")
    for path in [
        "/curator/consensus/",
        "/stats/",
        "/curator/subsets/",
        "/curator/physicians/",
        "/conversations/",
        "/curator/import/",
        "/endpoints/",
        "/guidelines/",
    ]:
        curator.go(path)

    researcher = visit("researcher", width)
    page = researcher.go("/runs/")
    row = page.locator("tr", has_text="demo-run")
    assert row.count() == 1
    assert "No grading runs yet" not in researcher.text()
    assert "imported: no endpoint called" in row.inner_text() or run.grader_config is not None
    for path in [f"/runs/{run.code}/", "/reports/", f"/reports/{run.code}/", "/metaeval/", "/endpoints/"]:
        researcher.go(path)
    page = researcher.go(f"/metaeval/report/?run={run.code}")
    explained = researcher.text("#reading-heading + dl")
    assert "strict majority" in explained
    assert "“undefined” beside a κ" in explained
    researcher.shot("report")


@pytest.mark.parametrize("width", WIDTHS)
def test_14_the_disagreement_review_separates_an_ambiguous_criterion_from_a_wrong_grader(visit, width):
    run = Run.objects.get(name="demo-run")
    researcher = visit("researcher", width)
    page = researcher.go(f"/metaeval/disagreements/?run={run.code}")
    page.click(".review-tabs a:has-text('The criterion is ambiguous')")
    page.wait_for_selector(".review-tabs a[aria-current=page]:has-text('ambiguous')")
    assert "Physicians disagree among themselves" in researcher.text()
    assert "Physicians' α" in researcher.text("#review-counts")
    researcher.check("physicians split")
    researcher.shot("review-split")
    page.click(".review-tabs a:has-text('The grader is wrong')")
    page.wait_for_selector(".review-tabs a[aria-current=page]:has-text('grader is wrong')")
    researcher.check("grader against agreeing physicians")
    overall = page.locator("#review-counts tbody tr").first.inner_text().split()
    document = json.loads(page.request.get(f"{researcher.base}/metaeval/download.json?run={run.code}").text())
    review = document["review"]
    assert int(overall[2]) == review["physicians_split"]["counts"]["overall"]
    assert int(overall[-1]) == review["grader_against_agreeing_physicians"]["counts"]["overall"]
    csv = page.request.get(f"{researcher.base}/metaeval/download.csv?run={run.code}").text()
    assert "items_physicians_split" in csv
    assert "items_grader_against_agreeing_physicians" in csv


@pytest.mark.parametrize("width", WIDTHS)
def test_refusals_are_pages_of_the_site_and_back_shows_the_answer_just_given(visit, width):
    physician = visit("physician", width)
    page = physician.go("/curator/subsets/")
    assert "You cannot do this here" in physician.text()
    assert "This page is not open to your role." in physician.text()
    assert page.locator("header.top .brand").is_visible()
    # A refused htmx request shows the refusal page too, instead of seeming to do nothing.
    page = physician.go("/")
    page.evaluate("htmx.ajax('GET', '/curator/subsets/', {target: '#messages'})")
    page.wait_for_selector("text=You cannot do this here")
    physician.check("refused htmx request")

    # The demo gives the physician open labeling items.
    page = physician.go("/labels/")
    first_url = page.url
    page.click("button[value=yes]")
    page.wait_for_url(lambda url: url != first_url)
    page.go_back()
    page.wait_for_url(first_url)
    page.wait_for_selector(".label-progress:has-text('you labeled this item met')")
    assert page.get_attribute("button[value=yes]", "aria-pressed") == "true"
    physician.check("back after labeling")


@pytest.mark.parametrize("width", WIDTHS)
def test_31_a_curator_draws_a_calibration_sample_in_the_browser(visit, width):
    run = Run.objects.get(name="demo-run")
    curator = visit("curator", width)
    page = curator.go(f"/reports/{run.code}/")
    page.click("#calibration a")
    page.wait_for_selector("#draw-heading")
    curator.check("calibration, nothing drawn")
    page.fill("#id_size", "1")
    page.click("#calibration-form button[type=submit]")
    page.wait_for_selector(".form-errors")
    assert "Responses to sample" in curator.text(".form-errors")
    curator.check("calibration form errors")
    page.fill("#id_size", "5")
    page.fill("#id_seed", "17")
    page.click("#calibration-form button[type=submit]")
    page.wait_for_selector("#preview-heading")
    assert "5 of the run's" in curator.text("#preview-heading + p")
    curator.check("calibration preview")
    page.click("#calibration-form button[name=confirm]")
    page.wait_for_selector("#calibrated-heading")
    assert "Drew 5 responses of demo-run (seed 17)" in curator.text("#messages")
    assert "0 of 5" in curator.text(".figures")
    curator.check("calibration drawn")
    curator.shot("calibration")


@pytest.mark.parametrize("width", WIDTHS)
def test_an_item_its_physician_may_not_label_is_taken_off_their_list_by_the_pages_button(visit, width):
    from grading.models import Response

    doctor = User.objects.get(username="physician").physician
    response = Response.objects.filter(conversation__criteria__isnull=False).first()
    conversation = response.conversation
    Conversation.objects.filter(id=conversation.id).update(author=doctor)  # they wrote it
    item = Assignment.objects.create(
        physician=doctor,
        kind=Assignment.Kind.LABEL,
        conversation=conversation,
        response=response,
        criterion=conversation.criteria.first(),
    )
    physician = visit("physician", width)
    page = physician.go(f"/labels/{item.code}/")
    assert "Take it off your list" in physician.text()
    item.refresh_from_db()
    assert item.status == Assignment.Status.OPEN, "opening the page withdrew it"
    page.click("text=Take it off my list")
    physician.check("item taken off the list")
    assert "It has been taken off your list" in physician.text()
    item.refresh_from_db()
    assert item.status == Assignment.Status.WITHDRAWN
