"""Odd data already in the database (written before the file checks, or behind the ORM's back)
never takes a page, an API response or a download down, and `check_stored_text` finds and
repairs it. PostgreSQL refuses NUL in text and surrogate escapes in jsonb, so there the odd
values live in the JSON text columns; SQLite holds every kind."""

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.formats.importer import import_healthbench_lines
from annotation.models import Conversation, Criterion, Physician
from grading.models import Grade, Response
from tests.healthbench_rows import consensus_row, line, row
from tests.people import person
from tests.test_report_pages import urls as report_urls
from tests.test_run_report import import_fixture

pytestmark = pytest.mark.django_db
SQLITE = connection.vendor == "sqlite"
BAD_MESSAGES = '[{"content": "lone \\ud800 and nul \\u0000 here", "role": "user"}]'


@pytest.fixture(autouse=True)
def _cold_cache():
    cache.clear()
    yield
    cache.clear()


def _raw(sql: str, params: list) -> None:
    # Behind the ORM's back, as an older version or another tool would have written it.
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.fixture
def odd(db):
    import_healthbench_lines([line(row("p-1")), line(consensus_row("p-2"))])
    conversation = Conversation.objects.get(prompt_id="p-1")
    criterion = conversation.criteria.order_by("position").first()
    _raw("UPDATE annotation_conversation SET messages = %s WHERE id = %s", [BAD_MESSAGES, conversation.id])
    _raw(
        "UPDATE annotation_idealresponse SET reference_responses = %s",
        ['["ref \\udc00 one", "' + "long " * 20000 + '"]'],
    )
    if SQLITE:
        _raw("UPDATE annotation_criterion SET text = %s WHERE id = %s", ["nul \x00 in a criterion", criterion.id])
        _raw(
            "UPDATE annotation_criterion SET tags = %s WHERE id = %s",
            ['["level:example", "axis:accuracy", "odd:\\ud83d"]', criterion.id],
        )
        _raw(
            "UPDATE annotation_conversation SET example_tags = %s, theme = %s WHERE id = %s",
            ['["theme:hedging", "x\\udfff"]', "t" * 40, conversation.id],
        )
        _raw(
            "UPDATE annotation_conversation SET canary = CAST(%s AS TEXT) WHERE id = %s",
            [b"bad \xff byte", conversation.id],
        )
    return conversation


def _curator(client):
    client.force_login(person("curator", Physician.Role.CURATOR))
    return client


def test_conversation_pages_show_a_replacement_character(client, odd):
    curator = _curator(client)
    for url in [reverse("conversation_list"), reverse("conversation_detail", args=[odd.code])]:
        response = curator.get(url)
        assert response.status_code == 200, url
        assert "\ufffd" in response.content.decode() or url == reverse("conversation_list")
    detail = curator.get(reverse("conversation_detail", args=[odd.code])).content.decode()
    assert "lone \ufffd and nul \ufffd here" in detail


def test_the_api_lists_and_shows_the_conversation(odd):
    api = APIClient()
    api.force_authenticate(person("researcher", Physician.Role.RESEARCHER))
    listing = api.get("/api/conversations/")
    assert listing.status_code == 200
    detail = api.get(f"/api/conversations/{odd.prompt_id}/")
    assert detail.status_code == 200
    assert detail.json()["messages"][0]["content"] == "lone \ufffd and nul \ufffd here"
    assert api.get("/api/criteria/").status_code == 200


def test_curator_pages_and_the_export_survive(client, odd):
    curator = _curator(client)
    for url in [
        reverse("curator_subsets"),
        reverse("curator_subset", args=["all"]),
        reverse("curator_stats"),
        reverse("curator_consensus"),
    ]:
        assert curator.get(url).status_code == 200, url
    export = curator.get(reverse("curator_subset_export", args=["all"]))
    assert export.status_code == 200
    body = b"".join(export.streaming_content).decode()
    assert "lone \\ufffd and nul \\ufffd here" in body


@pytest.mark.skipif(not SQLITE, reason="PostgreSQL refuses NUL in text and surrogate escapes in jsonb")
def test_sqlite_text_with_nul_or_bad_bytes_reads_back_replaced(odd):
    criterion = Criterion.objects.filter(conversation=odd).order_by("position").first()
    assert criterion.text == "nul \ufffd in a criterion"
    assert criterion.tags[-1] == "odd:\ufffd"
    odd.refresh_from_db()
    assert odd.canary == "bad \ufffd byte"
    assert odd.example_tags == ["theme:hedging", "x\ufffd"]


def test_report_pages_and_downloads_survive_odd_grades(client, tmp_path):
    run = import_fixture("mixed", tmp_path)
    grade = Grade.objects.filter(run=run).order_by("id").first()
    response = Response.objects.order_by("id").first()
    if SQLITE:
        _raw(
            "UPDATE grading_grade SET tags = %s, explanation = %s WHERE id = %s",
            ['["axis:accuracy", "level:example", "odd:\\udbff"]', "nul \x00 here", grade.id],
        )
        _raw("UPDATE grading_response SET text = %s WHERE id = %s", ["nul \x00 reply", response.id])
    conversation = response.conversation
    _raw("UPDATE annotation_conversation SET messages = %s WHERE id = %s", [BAD_MESSAGES, conversation.id])
    client.force_login(person("researcher", Physician.Role.RESEARCHER))
    for url in report_urls(run):
        got = client.get(url)
        assert got.status_code == 200, url
        if hasattr(got, "streaming_content"):
            b"".join(got.streaming_content)
    api = APIClient()
    api.force_authenticate(Physician.objects.get(role=Physician.Role.RESEARCHER).user)
    assert api.get(f"/api/runs/{run.name}/grades/").status_code == 200


def test_check_stored_text_reports_then_repairs(odd, capsys):
    with pytest.raises(CommandError, match="--repair"):
        call_command("check_stored_text")
    report = capsys.readouterr().out
    assert "annotation.Conversation id" in report
    assert "field messages[0].content: holds a lone surrogate (\\ud800)" in report
    assert "annotation.IdealResponse" in report
    assert "field reference_responses[0]" in report
    if SQLITE:
        assert "field text: holds a NUL character" in report
        assert "field theme: is 40 characters long; the column holds 32 (cut to fit)" in report
        assert "field canary: is not valid UTF-8 (byte 0xff" in report

    call_command("check_stored_text", "--repair")
    assert "Repaired" in capsys.readouterr().out
    call_command("check_stored_text")
    assert "No stored text breaks the file rules." in capsys.readouterr().out
    with connection.cursor() as cursor:
        cursor.execute("SELECT messages FROM annotation_conversation WHERE id = %s", [odd.id])
        assert "\\ufffd" in cursor.fetchone()[0]
    if SQLITE:
        odd.refresh_from_db()
        assert odd.theme == "t" * 32


def test_the_api_refuses_a_lone_surrogate_in_a_json_body():
    api = APIClient()
    api.force_authenticate(person("curator", Physician.Role.CURATOR))
    response = api.post(
        "/api/subsets/", data='{"name": "odd", "description": "x\\ud800"}', content_type="application/json"
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "field description: holds a lone surrogate (\\ud800)" in response.json()["detail"]


def test_the_api_renderer_replaces_a_lone_surrogate_it_is_handed():
    from healthbench_web.renderers import SafeJSONRenderer

    assert SafeJSONRenderer().render({"text": "a\ud800b", "n": 1}) == '{"text":"a\ufffdb","n":1}'.encode()
