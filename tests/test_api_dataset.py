"""API: conversations, criteria, subsets and versions, for every role."""

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Physician, SubsetVersion
from tests.healthbench_rows import consensus_row, row, write
from tests.people import person

pytestmark = pytest.mark.django_db
ROLES = [Physician.Role.PHYSICIAN, Physician.Role.CURATOR, Physician.Role.RESEARCHER]


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"), consensus_row("p-2"))
    call_command("import_healthbench", path, subset="picked")


def _client(role: str | None) -> APIClient:
    client = APIClient()
    if role:
        token, _ = Token.objects.get_or_create(user=person(f"u-{role}", role))
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


READ_ENDPOINTS = [
    "/api/conversations/",
    "/api/conversations/p-2/",
    "/api/criteria/?conversation=p-2",
    "/api/subsets/",
    "/api/subsets/picked/",
    "/api/subset-versions/",
]


@pytest.mark.parametrize("url", READ_ENDPOINTS)
@pytest.mark.parametrize(
    ("role", "expected"),
    [(None, 401), (Physician.Role.PHYSICIAN, 403), (Physician.Role.CURATOR, 200), (Physician.Role.RESEARCHER, 200)],
)
def test_reads_are_open_to_curators_and_researchers_only(dataset, url, role, expected):
    assert _client(role).get(url).status_code == expected


@pytest.mark.parametrize(
    ("role", "expected"),
    [(Physician.Role.PHYSICIAN, 403), (Physician.Role.RESEARCHER, 403), (Physician.Role.CURATOR, 201)],
)
def test_only_curators_create_subsets(dataset, role, expected):
    assert _client(role).post("/api/subsets/", {"name": f"mine-{role}"}, format="json").status_code == expected


@pytest.mark.parametrize(("role", "expected"), [(Physician.Role.RESEARCHER, 403), (Physician.Role.CURATOR, 201)])
def test_only_curators_freeze(dataset, role, expected):
    assert _client(role).post("/api/subsets/picked/freeze/").status_code == expected


def test_freezing_twice_returns_the_same_version(dataset):
    client = _client(Physician.Role.CURATOR)
    first = client.post("/api/subsets/picked/freeze/").json()
    again = client.post("/api/subsets/picked/freeze/")
    assert again.status_code == 200
    assert again.json()["code"] == first["code"]
    assert first["n_conversations"] == 2
    assert first["number"] == 1
    assert SubsetVersion.objects.count() == 1
    listed = client.get("/api/subset-versions/?subset=picked").json()["results"]
    assert [v["content_hash"] for v in listed] == [first["content_hash"]]


def test_conversation_detail_has_its_rubric_in_order(dataset):
    data = _client(Physician.Role.RESEARCHER).get("/api/conversations/p-2/").json()
    assert [c["points"] for c in data["criteria"]] == [9, 5, -5, 5]
    assert data["messages"][-1]["role"] == "user"
    assert data["theme"] == "emergency_referrals"


def test_lists_are_paginated_and_filtered(dataset):
    client = _client(Physician.Role.CURATOR)
    page = client.get("/api/conversations/?theme=hedging").json()
    assert page["count"] == 1
    assert page["results"][0]["prompt_id"] == "p-1"
    clusters = client.get("/api/criteria/?level=cluster").json()
    assert clusters["count"] == 2
    assert {c["cluster"] for c in clusters["results"]} == {
        "cluster:emergency_behaviour",
        "cluster:emergency_accuracy",
    }


def test_a_token_is_issued_for_a_username_and_password():
    person("tok", Physician.Role.RESEARCHER)
    response = APIClient().post("/api/token/", {"username": "tok", "password": "pw-tok"}, format="json")
    assert response.status_code == 200
    assert len(response.json()["token"]) == 40


def test_the_schema_and_docs_are_served(dataset):
    client = _client(Physician.Role.RESEARCHER)
    schema = client.get("/api/schema/?format=json")
    assert schema.status_code == 200
    assert "/api/conversations/{prompt_id}/" in schema.json()["paths"]
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert '<html lang="en">' in html
    assert "<code>/api/conversations/{prompt_id}/</code>" in html
    assert 'href="/api/schema/?format=json"' in html


def test_a_nul_byte_in_a_filter_is_a_bad_request_not_a_server_error(dataset):
    client = _client(Physician.Role.CURATOR)
    assert client.get("/api/criteria/?conversation=p%00x").status_code == 400
    assert client.get("/api/conversations/?theme=%00").status_code == 400
