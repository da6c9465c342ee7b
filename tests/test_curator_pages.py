import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from annotation.models import ConsensusCriterion, ConsensusVote, Conversation, Physician, Subset, SubsetVersion
from tests.healthbench_rows import consensus_row, line, row, rubric_item, write
from tests.people import person

pytestmark = pytest.mark.django_db


@pytest.fixture
def curator(client):
    user = person("cura", Physician.Role.CURATOR)
    client.force_login(user)
    return user


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"), consensus_row("p-2"))
    call_command("import_healthbench", path, subset="picked")
    return path


def _upload(content: bytes, name="file.jsonl"):
    return SimpleUploadedFile(name, content, content_type="application/jsonl")


def test_a_curator_imports_a_file_through_the_browser(client, curator):
    response = client.post(
        reverse("curator_import"), {"file": _upload(line(row("p-1")) + line(consensus_row("p-2"))), "subset": "hard"}
    )
    assert response.status_code == 200
    assert "2 new conversations" in response.content.decode()
    assert Subset.objects.get(name="hard").conversations.count() == 2


def test_a_bad_file_lists_each_error_by_line_and_writes_nothing(client, curator):
    bad = line(row("p-1")) + line(row("p-2", rubrics=[rubric_item("x", 0)])) + b"{truncated\n"
    response = client.post(reverse("curator_import"), {"file": _upload(bad)})
    assert response.status_code == 400
    page = response.content.decode()
    assert "Not imported: 2 problems" in page
    assert "rubrics[0].points" in page
    assert "0 points is not allowed" in page
    assert "is not valid JSON" in page
    assert Conversation.objects.count() == 0


def test_a_bad_subset_name_is_explained_beside_the_field(client, curator):
    response = client.post(reverse("curator_import"), {"file": _upload(line(row("p-1"))), "subset": "No Spaces"})
    assert "Use lowercase letters" in response.content.decode()
    assert Conversation.objects.count() == 0


@pytest.mark.parametrize(("role", "status"), [(Physician.Role.PHYSICIAN, 403), (Physician.Role.RESEARCHER, 403)])
def test_only_curators_import_and_edit_subsets(client, role, status, dataset):
    client.force_login(person("someone", role))
    assert client.get(reverse("curator_import")).status_code == status
    assert client.post(reverse("curator_subset_freeze", args=["picked"])).status_code == status
    assert (
        client.post(
            reverse("curator_subset_pick", args=["picked"]), {"prompt_ids": "p-1", "action": "remove"}
        ).status_code
        == status
    )
    assert Subset.objects.get(name="picked").conversations.count() == 2


def test_researchers_read_statistics_and_exports_but_physicians_do_not(client, dataset):
    client.force_login(person("res", Physician.Role.RESEARCHER))
    assert client.get(reverse("curator_stats") + "?subset=picked").status_code == 200
    assert client.get(reverse("curator_subset_export", args=["picked"])).status_code == 200
    client.force_login(person("doc", Physician.Role.PHYSICIAN))
    assert client.get(reverse("curator_stats")).status_code == 403
    assert client.get(reverse("curator_subset_export", args=["picked"])).status_code == 403


def test_anonymous_visitors_are_sent_to_log_in(client):
    response = client.get(reverse("curator_subsets"))
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


def test_a_curator_creates_filters_freezes_and_exports_a_subset(client, curator, dataset):
    response = client.post(reverse("curator_subsets"), {"name": "emergencies", "description": "ER cases"})
    assert response.status_code == 302
    client.post(
        reverse("curator_subset_filter", args=["emergencies"]), {"themes": ["emergency_referrals"], "mode": "add"}
    )
    assert list(Subset.objects.get(name="emergencies").conversations.values_list("prompt_id", flat=True)) == ["p-2"]
    # Freezing would end the undo of the filter just applied: the page asks first.
    asked = client.post(reverse("curator_subset_freeze", args=["emergencies"]))
    assert asked.status_code == 409
    assert "give up the undo" in asked.content.decode()
    assert not SubsetVersion.objects.filter(subset__name="emergencies").exists()
    change = Subset.objects.get(name="emergencies").changes.get()
    client.post(reverse("curator_subset_freeze", args=["emergencies"]), {"confirm": str(change.id)})
    version = SubsetVersion.objects.get(subset__name="emergencies")
    exported = b"".join(
        client.get(reverse("curator_subset_export", args=["emergencies"]) + "?frozen=1").streaming_content
    )
    assert [json.loads(x)["prompt_id"] for x in exported.splitlines()] == ["p-2"]
    assert version.number == 1
    page = client.get(reverse("curator_subset", args=["emergencies"])).content.decode()
    assert "v1" in page
    assert version.content_hash[:16] in page


def test_a_consensus_subset_can_be_made_in_the_browser_and_offers_its_rebuild(client, curator, dataset):
    page = client.get(reverse("curator_subsets")).content.decode()
    assert "Consensus: rebuilt from the consensus criteria attached" in page
    client.post(reverse("curator_subsets"), {"name": "consensus-2", "kind": "consensus"})
    assert Subset.objects.get(name="consensus-2").kind == Subset.Kind.CONSENSUS
    page = client.get(reverse("curator_subset", args=["consensus-2"])).content.decode()
    assert "Rebuild from attached consensus criteria" in page
    assert "If it only adds, it applies at once" in page


def test_a_duplicate_subset_name_is_explained(client, curator, dataset):
    response = client.post(reverse("curator_subsets"), {"name": "picked"})
    assert "already exists" in response.content.decode()


def test_consensus_overview_counts_votes_and_agreement(client, curator, dataset):
    entry = ConsensusCriterion.objects.get(cluster="cluster:emergency_behaviour")
    conversation = Conversation.objects.get(prompt_id="p-1")
    for name, applies in [("a", True), ("b", True), ("c", False)]:
        voter = person(name, Physician.Role.PHYSICIAN)
        ConsensusVote.objects.create(
            physician=voter.physician, conversation=conversation, consensus_criterion=entry, applies=applies
        )
    removed = person("gone", Physician.Role.PHYSICIAN, status=Physician.Status.REMOVED)
    trial = person("new", Physician.Role.PHYSICIAN, status=Physician.Status.TRIAL)
    ConsensusVote.objects.create(
        physician=trial.physician, conversation=conversation, consensus_criterion=entry, applies=False
    )
    ConsensusVote.objects.create(
        physician=removed.physician, conversation=conversation, consensus_criterion=entry, applies=False
    )
    row_ = next(r for r in client.get(reverse("curator_consensus")).context["rows"] if r.entry == entry)
    assert (row_.applies, row_.does_not_apply, row_.attached) == (2, 1, 1)
    assert row_.pairwise_agreement == pytest.approx(1 / 3)
    assert row_.unanimous_share == 0


def test_statistics_of_a_version_use_its_frozen_rubrics(client, curator, dataset):
    call_command("freeze_subset", "picked")
    Conversation.objects.get(prompt_id="p-1").criteria.all().delete()
    live = client.get(reverse("curator_stats") + "?subset=picked").context["stats"]
    frozen = client.get(reverse("curator_stats") + "?subset=picked&frozen=1").context["stats"]
    assert (live["criteria"], frozen["criteria"]) == (4, 7)
    assert {a: n for a, n, _ in frozen["per_axis"]}["accuracy"] == 3
    assert frozen["turns"]["median"] == 3


def test_a_curator_builds_hard_from_run_scores(client, curator, dataset):
    from tests.test_subset_builders import _graded_run

    Subset.objects.create(name="hard", kind=Subset.Kind.HARD)
    _graded_run("r1", {"p-1": [True], "p-2": [False]})
    page = client.get(reverse("curator_subset", args=["hard"])).content.decode()
    assert 'id="hard-build"' in page
    assert "r1" in page
    response = client.post(reverse("curator_subset_hard", args=["hard"]), {"runs": ["r1"], "n": 1}, follow=True)
    assert "1 added" in response.content.decode()
    assert list(Subset.objects.get(name="hard").conversations.values_list("prompt_id", flat=True)) == ["p-2"]
    response = client.post(reverse("curator_subset_hard", args=["hard"]), {"n": 1}, follow=True)
    assert "Pick at least one run" in response.content.decode()
