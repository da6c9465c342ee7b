"""Failed logins are limited per account and per address (django-axes, in the database): past
the limit even the right password is refused, with a page of the site that says when to try
again; the login page and /api/token/ count together."""

import pytest
from django.test import Client

from annotation.models import Physician
from healthbench_web.login_limits import client_address
from tests.people import person

pytestmark = pytest.mark.django_db
LIMIT = 10  # LOGIN_FAILURE_LIMIT's default


def _login(username: str, password: str, address: str = "192.0.2.1"):
    return Client(REMOTE_ADDR=address).post("/login/", {"username": username, "password": password})


def test_past_the_limit_the_right_password_is_refused_with_a_page_saying_when_to_try_again():
    person("alice", Physician.Role.PHYSICIAN)
    answers = [_login("alice", f"guess-{n}").status_code for n in range(LIMIT)]
    assert answers == [200] * (LIMIT - 1) + [429], "the failure that reaches the limit locks at once"
    locked = _login("alice", "pw-alice")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Logging in is paused" in page
    assert "Try again in 15 minutes" in page
    assert 'role="alert"' in page
    assert '<header class="top"' in page, "the refusal is a page of the site"


def test_a_failure_below_the_limit_still_lets_the_right_password_in():
    person("bob", Physician.Role.PHYSICIAN)
    for n in range(LIMIT - 1):
        assert _login("bob", f"guess-{n}").status_code == 200
    assert _login("bob", "pw-bob").status_code == 302


def test_guessing_across_accounts_from_one_address_locks_that_address_only():
    person("carol", Physician.Role.PHYSICIAN)
    for n in range(LIMIT):
        _login(f"nobody-{n}", "guess", address="198.51.100.7")
    assert _login("carol", "pw-carol", address="198.51.100.7").status_code == 429
    assert _login("carol", "pw-carol", address="198.51.100.8").status_code == 302


def test_guessing_one_account_from_many_addresses_locks_that_account():
    person("dave", Physician.Role.PHYSICIAN)
    for n in range(LIMIT):
        _login("dave", "guess", address=f"203.0.113.{n + 1}")
    assert _login("dave", "pw-dave", address="203.0.113.200").status_code == 429


def test_the_token_endpoint_counts_with_the_login_page_and_answers_json():
    person("erin", Physician.Role.RESEARCHER)
    for n in range(LIMIT - 1):
        _login("erin", f"guess-{n}")
    api = Client(REMOTE_ADDR="192.0.2.1")
    last = api.post("/api/token/", {"username": "erin", "password": "guess"})
    assert last.status_code == 429
    assert "Try again in" in last.json()["detail"]
    right = api.post("/api/token/", {"username": "erin", "password": "pw-erin"})
    assert right.status_code == 429
    assert "paused" in right.json()["detail"]


def test_the_address_behind_proxies_is_the_one_they_appended(rf, settings):
    request = rf.get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 192.0.2.9")
    assert client_address(request) == "10.0.0.1", "without a proxy the header is anyone's to write"
    settings.API_NUM_PROXIES = 1
    assert client_address(request) == "192.0.2.9"
