"""Subset changes: a preview and a confirmation before anything is removed, undo until the next freeze."""

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Conversation, Physician, Subset, SubsetMember
from annotation.services.subset_changes import (
    NothingToUndo,
    SubsetChanged,
    subset_change_apply,
    subset_change_undo,
    subset_plan_set,
)
from annotation.services.subset_versions import SubsetEmpty, subset_version_freeze
from tests.healthbench_rows import consensus_row, row, write
from tests.people import person

pytestmark = pytest.mark.django_db


@pytest.fixture
def curator(client):
    client.force_login(person("cura", Physician.Role.CURATOR))
    return client


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"), consensus_row("p-2"), row("p-3"), consensus_row("p-4", theme="hedging"))
    call_command("import_healthbench", path, subset="picked")


def _members(name="picked"):
    return list(
        SubsetMember.objects.filter(subset__name=name).order_by("id").values_list("conversation__prompt_id", flat=True)
    )


def _ids(*prompt_ids):
    by_prompt = dict(Conversation.objects.values_list("prompt_id", "id"))
    return [by_prompt[p] for p in prompt_ids]


def _pick(client, ids, action="add", follow=False, **extra):
    url = reverse("curator_subset_pick", args=["picked"])
    return client.post(url, {"prompt_ids": ids, "action": action, **extra}, follow=follow)


def test_hand_picking_adds_the_known_ids_and_lists_the_unknown_ones(curator, dataset):
    Subset.objects.create(name="mine")
    url = reverse("curator_subset_pick", args=["mine"])
    page = curator.post(url, {"prompt_ids": "p-2\nnope\np-3\nalso-nope", "action": "add"}, follow=True).text
    assert _members("mine") == ["p-2", "p-3"]
    assert "2 added, 0 removed" in page
    assert "Not found, so left out: nope, also-nope." in page


def test_hand_picking_only_unknown_ids_changes_nothing_and_says_so(curator, dataset):
    page = _pick(curator, "nope", follow=True).text
    assert "None of these prompt_ids is a conversation here, so nothing changed" in page
    assert "nope" in page
    assert _members() == ["p-1", "p-2", "p-3", "p-4"]


def test_removing_shows_a_preview_and_changes_nothing_until_confirmed(curator, dataset):
    page = _pick(curator, "p-2\nnope", action="remove")
    assert page.status_code == 200
    text = page.text
    assert "Check before applying" in text
    assert "remove 1" in text
    assert "Not found, so left out: nope." in text
    assert _members() == ["p-1", "p-2", "p-3", "p-4"]
    fingerprint = text.split('name="confirm" value="')[1].split('"')[0]
    _pick(curator, "p-2\nnope", action="remove", confirm=fingerprint)
    assert _members() == ["p-1", "p-3", "p-4"]


def test_a_confirmation_of_a_stale_preview_is_shown_again_instead_of_applied(curator, dataset):
    fingerprint = _pick(curator, "p-2", action="remove").text.split('name="confirm" value="')[1].split('"')[0]
    # Meanwhile someone else removed p-2 and p-3; the curator's confirmation names an old plan.
    SubsetMember.objects.filter(conversation__prompt_id="p-3").delete()
    page = _pick(curator, "p-2\np-3", action="remove", confirm=fingerprint)
    assert "changed since that preview" in page.text
    assert _members() == ["p-1", "p-2", "p-4"]


def test_replacing_by_filter_previews_what_is_added_and_removed(curator, dataset):
    Subset.objects.create(name="mine")
    SubsetMember.objects.create(
        subset=Subset.objects.get(name="mine"), conversation=Conversation.objects.get(prompt_id="p-1")
    )
    url = reverse("curator_subset_filter", args=["mine"])
    text = curator.post(url, {"themes": ["emergency_referrals"], "mode": "replace"}).text
    assert "add 1</strong> and <strong>remove 1" in text
    assert _members("mine") == ["p-1"]


def test_rebuilding_consensus_previews_before_removing(curator, dataset):
    consensus = Subset.objects.create(name="consensus", kind=Subset.Kind.CONSENSUS)
    for prompt_id in ("p-1", "p-2"):
        SubsetMember.objects.create(subset=consensus, conversation=Conversation.objects.get(prompt_id=prompt_id))
    text = curator.post(reverse("curator_subset_rebuild", args=["consensus"])).text
    assert "Rebuild from attached consensus criteria" in text
    assert "remove 1" in text
    assert _members("consensus") == ["p-1", "p-2"]


def test_undo_puts_removed_members_back_in_their_places(curator, dataset):
    subset = Subset.objects.get(name="picked")
    plan = subset_plan_set(subset=subset, conversation_ids=_ids("p-4", "p-1"), action="test")
    subset_change_apply(subset=subset, plan=plan)
    assert _members() == ["p-1", "p-4"]
    page = curator.get(reverse("curator_subset", args=["picked"])).text
    assert "Undo it: take out 0, put back 2" in page
    curator.post(reverse("curator_subset_undo", args=["picked"]))
    assert _members() == ["p-1", "p-2", "p-3", "p-4"]


def test_undo_also_takes_out_what_was_added(curator, dataset):
    Subset.objects.create(name="mine")
    curator.post(reverse("curator_subset_pick", args=["mine"]), {"prompt_ids": "p-3\np-1", "action": "add"})
    assert _members("mine") == ["p-3", "p-1"]
    page = curator.post(reverse("curator_subset_undo", args=["mine"]), follow=True).text
    assert "2 taken out again, 0 put back" in page
    assert _members("mine") == []


def test_a_change_cannot_be_undone_after_the_subset_is_frozen(dataset):
    subset = Subset.objects.get(name="picked")
    subset_change_apply(subset=subset, plan=subset_plan_set(subset=subset, conversation_ids=_ids("p-1"), action="t"))
    subset_version_freeze(subset=subset)
    with pytest.raises(NothingToUndo):
        subset_change_undo(subset=subset)


def test_a_plan_that_no_longer_fits_is_refused(dataset):
    subset = Subset.objects.get(name="picked")
    plan = subset_plan_set(subset=subset, conversation_ids=_ids("p-1"), action="t")
    SubsetMember.objects.filter(conversation__prompt_id="p-2").delete()
    with pytest.raises(SubsetChanged):
        subset_change_apply(subset=subset, plan=plan)
    assert _members() == ["p-1", "p-3", "p-4"]


def test_freezing_an_empty_subset_is_refused_everywhere(curator, dataset):
    empty = Subset.objects.create(name="empty")
    with pytest.raises(SubsetEmpty):
        subset_version_freeze(subset=empty)
    page = curator.post(reverse("curator_subset_freeze", args=["empty"]), follow=True).text
    assert "has no members, so there is nothing to freeze" in page
    assert "Add conversations before freezing" in page
    with pytest.raises(CommandError, match="no members"):
        call_command("freeze_subset", "empty")
    assert not empty.versions.exists()


def test_the_api_refuses_to_freeze_an_empty_subset(dataset):
    from rest_framework.test import APIClient

    Subset.objects.create(name="empty")
    client = APIClient()
    client.force_authenticate(person("cura2", Physician.Role.CURATOR))
    response = client.post("/api/subsets/empty/freeze/")
    assert response.status_code == 400
    assert "no members" in response.json()["detail"]


def test_members_show_the_opening_words_theme_and_a_link(curator, dataset):
    page = curator.get(reverse("curator_subset", args=["picked"])).text
    conversation = Conversation.objects.get(prompt_id="p-1")
    assert reverse("conversation_detail", args=[conversation.code]) in page
    assert conversation.first_user_text().split()[0] in page
