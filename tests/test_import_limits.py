"""The size limits of imports: stated on the page, enforced by the browser import and the
commands alike, and values that used to overflow a column."""

from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.formats import validation
from annotation.formats.exporter import export_subset_lines
from annotation.models import Conversation, Physician, Subset
from tests.healthbench_rows import line, row
from tests.people import person

pytestmark = pytest.mark.django_db
LONG_LINE = b'{"prompt_id": "' + b"x" * (validation.MAX_LINE_BYTES + 10) + b'"}\n'


@pytest.fixture
def curator(client):
    client.force_login(person("curator", Physician.Role.CURATOR))
    return client


def test_the_import_page_states_its_limits(curator):
    page = curator.get(reverse("curator_import")).content.decode()
    assert "Files up to 256 MB" in page
    assert "each line at most 16 MB" in page
    assert 'id="upload-progress"' in page
    assert "upload_progress.js" in page


def test_a_file_over_the_upload_limit_is_refused_beside_the_field(curator, monkeypatch):
    monkeypatch.setattr("annotation.forms.curator.MAX_UPLOAD_BYTES", 1000)
    upload = SimpleUploadedFile("big.jsonl", line(row("p-1")) * 2, content_type="application/jsonl")
    response = curator.post(reverse("curator_import"), {"file": upload})
    assert response.status_code == 400
    assert "the browser import takes at most 0 MB" in response.content.decode()
    assert not Conversation.objects.exists()


def test_a_line_over_the_line_limit_is_refused_in_the_browser(curator):
    upload = SimpleUploadedFile("long.jsonl", line(row("p-1")) + LONG_LINE, content_type="application/jsonl")
    response = curator.post(reverse("curator_import"), {"file": upload})
    assert response.status_code == 400
    page = response.content.decode()
    assert '<td class="num">2</td>' in page
    assert f"is {len(LONG_LINE):,} bytes long; a line may hold at most 16,777,216 bytes" in page
    assert not Conversation.objects.exists()


def test_a_line_over_the_line_limit_is_refused_by_the_command(tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_bytes(line(row("p-1")) + LONG_LINE.rstrip(b"\n"))
    err = StringIO()
    with pytest.raises(CommandError, match="database is unchanged"):
        call_command("import_healthbench", str(path), stderr=err)
    assert f"line 2: is {len(LONG_LINE) - 1:,} bytes long" in err.getvalue()


def test_a_long_canary_is_stored_and_exported_byte_for_byte(tmp_path):
    data = row("p-1", canary="canary " * 150)
    path = tmp_path / "canary.jsonl"
    path.write_bytes(line(data))
    call_command("import_healthbench", str(path), stdout=StringIO())
    assert Conversation.objects.get().canary == data["canary"]
    assert [x + "\n" for x in export_subset_lines(Subset.objects.get(name="all"))] == [line(data).decode()]
