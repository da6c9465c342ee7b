"""Giving out tasks (curator page) and seeing them (physician home)."""

from collections import Counter

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from annotation.models import Assignment, IdealResponse, Physician, Subset, SubsetMember
from annotation.services.assignments import assignments_create, spread
from tests.workspace import client_for, conversation, make_world, physician, task

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


def _assign(client, **data):
    fields = {"kind": "consensus_vote", "limit": "50", "per_item": "2", "condition": "no_reference", **data}
    return client.post(reverse("assignments"), fields)


# spread() is pure: these need no database.


def test_spread_gives_each_item_n_physicians_least_loaded_first():
    items = [(c, None, None) for c in range(6)]
    pairs, short = spread(
        items, physician_ids=[1, 2, 3, 4], per_item=2, load={1: 5, 2: 0, 3: 0, 4: 0}, assigned={}, excluded={}
    )
    assert short == 0
    per_item = Counter(item for item, _ in pairs)
    assert set(per_item.values()) == {2}
    load = Counter(pid for _, pid in pairs)
    # 12 tasks: physician 1 already had 5, so the other three take them first and evenly.
    assert load[2] == load[3] == load[4]
    assert load[2] + load[3] + load[4] + load[1] == 12
    assert load[1] <= 1


def test_spread_never_picks_the_same_physician_twice_for_an_item_or_an_excluded_one():
    items = [(1, 10, 100), (1, 11, 100), (2, 10, 100)]
    pairs, short = spread(
        items, physician_ids=[1, 2, 3], per_item=2, load={}, assigned={(1, 10, 100): {3}}, excluded={1: {2}}
    )
    assert short == 0
    chosen = {item: {pid for i, pid in pairs if i == item} for item in items}
    assert chosen[(1, 10, 100)] == {1}
    assert chosen[(1, 11, 100)] == {1, 3}
    assert 2 not in chosen[(1, 10, 100)] | chosen[(1, 11, 100)]
    assert len(chosen[(2, 10, 100)]) == 2


def test_spread_reports_items_it_could_not_fill():
    pairs, short = spread([(1, None, None)], physician_ids=[7], per_item=3, load={}, assigned={}, excluded={})
    assert pairs == [((1, None, None), 7)]
    assert short == 1


def test_a_curator_assigns_votes_to_n_physicians_per_conversation(world):
    extra = [conversation(f"conv-extra-{n}") for n in range(4)]
    response = _assign(client_for(world.curator), theme="emergency_referrals", status="unassigned")
    assert response.status_code == 302
    for conv in extra:
        assert Assignment.objects.filter(conversation=conv, kind="consensus_vote").count() == 2
    # conv-a already had two voters and was not "unassigned"; nothing was added to it.
    assert Assignment.objects.filter(conversation=world.a, kind="consensus_vote").count() == 2
    assert set(Assignment.objects.filter(conversation__in=extra).values_list("assigned_by", flat=True)) == {
        world.curator.id
    }


def test_assigning_twice_adds_nothing_the_second_time(world):
    client = client_for(world.curator)
    _assign(client, kind="rubric", per_item="1")
    count = Assignment.objects.count()
    response = _assign(client, kind="rubric", per_item="1")
    assert Assignment.objects.count() == count
    assert "0 tasks created" in client.get(response.url).text


def test_physicians_are_chosen_by_specialty_and_language(world):
    conv = conversation("conv-lang")
    _assign(
        client_for(world.curator),
        kind="rubric",
        per_item="5",
        specialty="Family medicine",
        language="pt",
        status="unassigned",
    )
    assert list(Assignment.objects.filter(conversation=conv).values_list("physician", flat=True)) == [
        world.colleague.id
    ]


def test_applicants_and_removed_physicians_get_no_tasks(world):
    conv = conversation("conv-nobody")
    _assign(client_for(world.curator), kind="rubric", per_item="10", status="unassigned")
    chosen = set(Assignment.objects.filter(conversation=conv).values_list("physician__status", flat=True))
    assert chosen <= {Physician.Status.ACTIVE, Physician.Status.TRIAL}
    assert Assignment.objects.filter(conversation=conv).count() == 4  # owner, colleague, outsider, trial


def test_conversations_are_chosen_by_subset(world):
    subset = Subset.objects.create(name="pilot")
    SubsetMember.objects.create(subset=subset, conversation=world.b)
    _assign(client_for(world.curator), kind="ideal_response", per_item="1", subset="pilot")
    assert set(Assignment.objects.filter(kind="ideal_response").values_list("conversation", flat=True)) == {
        world.a.id,
        world.b.id,
    }
    assert Assignment.objects.filter(kind="ideal_response", conversation=world.b).count() == 1


def test_labeling_tasks_skip_the_rubric_author(world):
    summary = assignments_create(
        kind=Assignment.Kind.LABEL,
        conversation_ids=[world.a.id],
        physicians=[world.owner, world.colleague, world.outsider, world.trial],
        per_item=3,
        assigned_by=world.curator,
    )
    labelers = set(Assignment.objects.filter(kind="label").values_list("physician", flat=True))
    assert world.owner.id not in labelers  # owner holds the rubric task of conv-a
    assert summary.items == 2  # two responses x one consensus criterion
    assert summary.short == 0


def test_ideal_tasks_with_references_name_the_responses_shown(world):
    conv = conversation("conv-refs")
    refs = [conv.responses.create(text=f"Reference {n}", model_name="m", sample_index=n) for n in range(5)]
    assignments_create(
        kind=Assignment.Kind.IDEAL_RESPONSE,
        conversation_ids=[conv.id],
        physicians=[world.outsider],
        per_item=1,
        assigned_by=world.curator,
        condition=IdealResponse.Condition.WITH_REFERENCE,
    )
    created = Assignment.objects.get(conversation=conv)
    assert created.condition == IdealResponse.Condition.WITH_REFERENCE
    assert list(created.reference_responses.order_by("id")) == refs[:4]


def test_the_database_refuses_a_second_identical_task(world):
    with pytest.raises(IntegrityError), transaction.atomic():
        task(world.owner, Assignment.Kind.RUBRIC, world.a)
    with pytest.raises(IntegrityError), transaction.atomic():
        task(world.colleague, Assignment.Kind.LABEL, world.a, response=world.responses[0], criterion=world.cluster)
    with pytest.raises(IntegrityError), transaction.atomic():
        task(world.colleague, Assignment.Kind.LABEL, world.a)  # a labeling task must name its item


def test_the_preview_says_how_many_conversations_and_physicians_match(world):
    page = client_for(world.curator).get(reverse("assignments"), {"kind": "rubric", "limit": "1", "per_item": "2"}).text
    assert "<strong>1</strong> conversation selected (of 2 matching)" in page
    assert "<strong>4</strong> physicians eligible" in page


def test_the_preview_offers_to_assign_exactly_what_was_previewed(world):
    client = client_for(world.curator)
    page = client.get(
        reverse("assignments"), {"kind": "consensus_vote", "theme": "hedging", "limit": "7", "per_item": "3"}
    )
    form = page.text.split('<section id="preview"')[1].split("</form>")[0]
    assert 'name="theme" value="hedging"' in form
    assert 'name="per_item" value="3"' in form
    assert 'name="csrfmiddlewaretoken"' in form
    # The filters themselves are a GET form: no CSRF token ends up in an address.
    assert "csrfmiddlewaretoken" not in page.text.split('id="assign-form"')[1].split("</form>")[0]


def test_the_preview_is_a_fragment_for_htmx(world):
    response = client_for(world.curator).get(
        reverse("assignments"), {"kind": "rubric", "limit": "5", "per_item": "2"}, HTTP_HX_REQUEST="true"
    )
    assert response.text.lstrip().startswith('<section id="preview"')


def test_progress_per_physician(world):
    world.rubric_task.status, world.rubric_task.completed = Assignment.Status.DONE, world.rubric_task.created
    world.rubric_task.save()
    page = client_for(world.researcher).get(reverse("assignments")).text
    row = page.split("<td>dr_owner</td>")[1].split("</tr>")[0]
    assert '<td class="num">1 / 1</td>' in row
    assert '<td class="num">1 / 3</td>' in row
    assert "Assign</button>" not in page  # researchers read only


def test_a_physicians_home_lists_tasks_by_kind_with_progress(world):
    page = client_for(world.colleague).get("/").text
    assert 'id="tasks-label"' in page
    label_card = page.split('id="tasks-label"')[1].split("</article>")[0]
    assert "<strong>2</strong> to do · 0 of 2 done" in label_card
    assert reverse("label_next") in label_card
    rubric_card = page.split('id="tasks-rubric"')[1].split("</article>")[0]
    assert reverse("rubric_editor", args=[world.b.code]) in rubric_card
    assert world.a.prompt_id not in rubric_card


def test_an_applicant_sees_no_tasks(world):
    page = client_for(world.applicant).get("/").text
    assert "reviewing your application" in page


def test_the_home_page_costs_the_same_queries_however_many_tasks(world, django_assert_max_num_queries):
    client = client_for(world.colleague)
    with django_assert_max_num_queries(4):
        assert client.get("/").status_code == 200
    for n in range(30):
        conv = conversation(f"conv-more-{n}")
        task(world.colleague, Assignment.Kind.RUBRIC, conv)
        task(world.colleague, Assignment.Kind.CONSENSUS_VOTE, conv)
    with django_assert_max_num_queries(4):
        page = client.get("/").text
    # Five open tasks listed per kind: conv-b / conv-a and four of the new ones in each.
    assert page.count("conv-more-") == 8


def test_the_assignment_page_costs_the_same_queries_however_many_physicians(world, django_assert_max_num_queries):
    client = client_for(world.curator)
    # 10: one of them counts the external physicians the progress table leaves out.
    with django_assert_max_num_queries(10):
        assert client.get(reverse("assignments")).status_code == 200
    for n in range(30):
        task(physician(f"dr_more_{n}"), Assignment.Kind.RUBRIC, world.b)
    with django_assert_max_num_queries(10):
        assert client.get(reverse("assignments")).status_code == 200


def test_a_clash_with_another_curator_changes_nothing_and_says_so(world, monkeypatch):
    from annotation.views import curation as views_curation

    def clash(**kwargs):
        raise IntegrityError("one_assignment_per_physician_kind_conversation")

    monkeypatch.setattr(views_curation, "assignments_create", clash)
    response = client_for(world.curator).post(
        reverse("assignments"), {"kind": "rubric", "limit": "5", "per_item": "1"}, follow=True
    )
    assert "at the same moment" in response.text
