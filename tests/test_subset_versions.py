import pytest
from django.core.management import CommandError, call_command

from annotation.models import Criterion, SubsetVersion
from annotation.services.subset_versions import version_content_hash
from tests.healthbench_rows import consensus_row, row, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"), consensus_row("p-2"))
    call_command("import_healthbench", path, subset="picked")
    return path


def test_freezing_records_members_rubrics_and_hash(dataset):
    call_command("freeze_subset", "picked")
    version = SubsetVersion.objects.get()
    assert version.number == 1
    assert [m["prompt_id"] for m in version.snapshot] == ["p-1", "p-2"]
    assert len(version.snapshot[1]["rubrics"]) == 4
    assert version.conversations.count() == 2
    assert version_content_hash(version) == version.content_hash


def test_a_frozen_version_never_changes_when_rubrics_are_edited(dataset, tmp_path):
    call_command("freeze_subset", "picked")
    before = tmp_path / "v1.jsonl"
    call_command("export_healthbench", subset="picked", frozen=1, out=before)
    Criterion.objects.filter(conversation__prompt_id="p-1").update(points=1)
    after = tmp_path / "v1-again.jsonl"
    call_command("export_healthbench", subset="picked", frozen=1, out=after)
    assert after.read_bytes() == before.read_bytes() == dataset.read_bytes()
    call_command("freeze_subset", "picked")
    assert SubsetVersion.objects.count() == 2
    assert SubsetVersion.objects.get(number=2).content_hash != SubsetVersion.objects.get(number=1).content_hash


def test_freezing_an_unchanged_subset_reports_the_latest_version(dataset, capsys):
    call_command("freeze_subset", "picked")
    call_command("freeze_subset", "picked")
    assert SubsetVersion.objects.count() == 1
    assert "unchanged since version 1" in capsys.readouterr().out


def test_exporting_an_unknown_version_names_the_known_ones(dataset):
    call_command("freeze_subset", "picked")
    with pytest.raises(CommandError, match=r"has no version 7 \(versions: 1\)"):
        call_command("export_healthbench", subset="picked", frozen=7)
