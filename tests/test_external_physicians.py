"""External physicians (from an imported file, no account): their labels count, they never receive tasks.

The assignment page counts only physicians who can log in and says how many external ones it left
out; a curator links an external physician to an account with a preview and a confirmation.
"""

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Assignment, Conversation, Physician, PhysicianLabel
from annotation.services.assignments import assignments_create, least_loaded_physician
from annotation.services.drafts import conversation_draft_create
from tests.metaeval_rows import CATEGORY, OTHER_CATEGORY, meta_row, physician, write
from tests.workspace import PASSWORD, client_for
from tests.workspace import physician as account_physician

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(tmp_path):
    """Six external physicians (0-5) with labels on two conversations, as `import_meta_eval` makes them."""
    path = tmp_path / "meta.jsonl"
    write(
        path,
        meta_row("p-1", "c-1", CATEGORY, (True, False, True), (0, 1, 2)),
        meta_row("p-1", "c-2", CATEGORY, (False, False), (0, 3)),
        meta_row("p-2", "c-3", OTHER_CATEGORY, (True, True, False), (3, 4, 5)),
    )
    call_command("import_meta_eval", path, stdout=StringIO())
    assert Physician.objects.filter(user__isnull=True).count() == 6
    return path


def _external(n: int) -> Physician:
    return Physician.objects.get(anonymized_id=physician(n))


def test_imported_physicians_are_external_and_keep_their_labels(imported):
    external = _external(0)
    assert external.is_external
    assert external.status == Physician.Status.ACTIVE
    assert external.labels.count() == 2
    assert PhysicianLabel.objects.filter(physician__user__isnull=True).count() == 8


@pytest.mark.parametrize("kind", [Assignment.Kind.LABEL, Assignment.Kind.CONSENSUS_VOTE, Assignment.Kind.RUBRIC])
def test_no_task_goes_to_an_external_physician(imported, kind):
    doctors = [account_physician(f"dr_{n}") for n in range(2)]
    everyone = list(Physician.objects.order_by("id"))
    assert len(everyone) == 8
    summary = assignments_create(
        kind=kind,
        conversation_ids=list(Conversation.objects.values_list("id", flat=True)),
        physicians=everyone,
        per_item=2,
        assigned_by=None,
    )
    assert summary.created > 0
    receivers = set(Assignment.objects.values_list("physician_id", flat=True))
    assert receivers == {d.id for d in doctors}


def test_the_least_loaded_physician_is_one_who_can_log_in(imported):
    # External physicians are the earliest ids and have no tasks: they would win every tie.
    doctor = account_physician("dr_late")
    task = Assignment.objects.create(
        physician=doctor, kind=Assignment.Kind.RUBRIC, conversation=Conversation.objects.get(prompt_id="p-1")
    )
    assert least_loaded_physician() == doctor
    assert least_loaded_physician(exclude=[doctor.id]) is None
    assert task.physician.user is not None


def test_a_drafted_conversation_goes_to_a_physician_with_an_account(imported):
    doctor = account_physician("dr_writer")
    curator = account_physician("curator", role=Physician.Role.CURATOR)
    outcome = conversation_draft_create(
        author=curator, theme="hedging", messages=[{"role": "user", "content": "Is a three-week cough normal?"}]
    )
    assert outcome.rubric_task is not None
    assert outcome.rubric_task.physician == doctor


def test_the_assignment_page_counts_only_physicians_who_can_log_in(imported):
    curator = account_physician("curator", role=Physician.Role.CURATOR)
    account_physician("dr_a")
    account_physician("dr_b")
    client = client_for(curator)
    page = client.get(
        reverse("assignments"), {"kind": "label", "limit": "50", "per_item": "2", "condition": "no_reference"}
    )
    html = page.content.decode()
    assert "<strong>2</strong> physicians eligible" in html
    assert "6 external physicians left out" in html
    assert reverse("physician_link") in html
    # The progress table lists the two who can log in and counts the rest.
    assert "anon:" not in html
    assert "Not listed: 6 external physicians" in html
    client.post(reverse("assignments"), {"kind": "label", "limit": "50", "per_item": "2", "condition": "no_reference"})
    assert set(Assignment.objects.values_list("physician__user__username", flat=True)) == {"dr_a", "dr_b"}


def test_the_physicians_page_says_how_many_are_external(imported):
    curator = account_physician("curator", role=Physician.Role.CURATOR)
    html = client_for(curator).get(reverse("physicians")).content.decode()
    assert "6 external physicians from imported files" in html
    assert reverse("physician_link") in html


def test_a_curator_links_an_external_physician_to_a_new_account_after_a_preview(imported):
    curator = account_physician("curator", role=Physician.Role.CURATOR)
    user = User.objects.create_user("dr_found", password=PASSWORD)
    client = client_for(curator)
    external = _external(3)
    prefix = physician(3)[:12]
    preview = client.get(reverse("physician_link"), {"external": prefix, "username": "dr_found"})
    html = preview.content.decode()
    assert "What will happen" in html
    assert f"anon:{prefix}</strong> (2 labels) becomes the account <strong>dr_found</strong>" in html
    # Nothing happens on preview.
    assert Physician.objects.get(id=external.id).user is None
    done = client.post(reverse("physician_link"), {"external": prefix, "username": "dr_found"}, follow=True)
    assert f"anon:{prefix} is now dr_found: 2 labels kept." in done.content.decode()
    linked = Physician.objects.get(id=external.id)
    assert linked.user == user
    assert linked.anonymized_id == physician(3)
    assert linked.labels.count() == 2
    # Now they can log in, so they receive tasks.
    assignments_create(
        kind=Assignment.Kind.RUBRIC,
        conversation_ids=list(Conversation.objects.values_list("id", flat=True)),
        physicians=list(Physician.objects.all()),
        per_item=1,
        assigned_by=None,
    )
    assert set(Assignment.objects.values_list("physician_id", flat=True)) == {linked.id}


def test_linking_to_an_account_with_a_profile_moves_the_labels_to_it(imported):
    curator = account_physician("curator", role=Physician.Role.CURATOR)
    doctor = account_physician("dr_known", specialty="Pulmonology")
    external = _external(5)
    client = client_for(curator)
    preview = client.get(reverse("physician_link"), {"external": physician(5), "username": "dr_known"})
    assert "already has a physician profile: it takes over the anonymised id" in preview.content.decode()
    client.post(reverse("physician_link"), {"external": physician(5), "username": "dr_known"})
    assert not Physician.objects.filter(id=external.id).exists()
    doctor.refresh_from_db()
    assert doctor.anonymized_id == physician(5)
    assert list(doctor.labels.values_list("met", flat=True)) == [False]
    assert PhysicianLabel.objects.count() == 8


def test_a_link_is_refused_with_the_reason(imported):
    curator = account_physician("curator", role=Physician.Role.CURATOR)
    researcher = account_physician("researcher", role=Physician.Role.RESEARCHER)
    client = client_for(curator)

    def refused(external: str, username: str) -> str:
        before = PhysicianLabel.objects.filter(physician__user__isnull=True).count()
        client.post(reverse("physician_link"), {"external": external, "username": username})
        assert PhysicianLabel.objects.filter(physician__user__isnull=True).count() == before
        return client.get(reverse("physician_link"), {"external": external, "username": username}).content.decode()

    assert "is a researcher, not a physician" in refused(physician(0), "researcher")
    assert "No account is called nobody" in refused(physician(0), "nobody")
    assert "No external physician&#x27;s anonymised id starts with" in refused("ffffffffffff", "researcher")
    assert "at least the first 8 characters" in refused("ab", "researcher")
    # One label per item: an account that labelled the same item cannot be the same person.
    doctor = account_physician("dr_both")
    label = _external(1).labels.get()
    PhysicianLabel.objects.create(physician=doctor, response=label.response, criterion=label.criterion, met=True)
    assert "both labelled 1 of the same items" in refused(physician(1), "dr_both")
    # Researchers may not link anyone.
    assert client_for(researcher).get(reverse("physician_link")).status_code == 403
    assert Physician.objects.filter(user__isnull=True).count() == 6


def test_the_link_page_lists_external_physicians(imported):
    curator = account_physician("curator", role=Physician.Role.CURATOR)
    html = client_for(curator).get(reverse("physician_link")).content.decode()
    assert "External physicians (6)" in html
    assert physician(0) in html
