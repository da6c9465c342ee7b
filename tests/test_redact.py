"""A key is kept out of stored, shown and logged text in every form a gateway might echo it in."""

import base64
import json
import logging
import time
import urllib.parse

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Physician
from grading.models import Grade, Run
from grading.pipeline import client as llm
from grading.pipeline.batches import batch_run
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from healthbench_web.log_format import JsonFormatter, TextFormatter
from healthbench_web.redact import REMOVED, redact
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.llm_shapes import ECHO_FORMS
from tests.people import person

pytest_plugins = ["tests.llm_server"]

KEY = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"


def forms_of(key: str) -> dict[str, str]:
    return {
        "raw": key,
        "base64": base64.b64encode(key.encode()).decode(),
        "base64url": base64.urlsafe_b64encode(key.encode()).decode(),
        "base64 of Basic credentials": base64.b64encode(f"user:{key}".encode()).decode(),
        "base64 after Bearer": base64.b64encode(f"Bearer {key}".encode()).decode(),
        "%-encoded": urllib.parse.quote(key, safe=""),
        "%-encoded whole": "".join(f"%{byte:02x}" for byte in key.encode()),
        "%-encoded in part": key.replace("-", "%2D"),
        "hex": key.encode().hex(),
        "spaced": " ".join(key),
        "dotted": ".".join(key),
        "split by runs": "  ..  ".join([key[:10], key[10:20], key[20:]]),
        "zero-width": "\u200b".join(key),
        "zero-width joiners and spaces": "\u200d \ufeff".join(key),
        "json-escaped newlines": "\\n".join(key),
        "json-escaped characters": key.replace("-", "\\u002d"),
        "upper case": key.upper(),
    }


@pytest.mark.parametrize("form", list(forms_of(KEY)))
def test_it_removes_the_key_in_every_form(form):
    echoed = forms_of(KEY)[form]
    said = redact(f"401: Incorrect API key provided: {echoed}. Try again.", [KEY])
    assert said.startswith("401: Incorrect API key provided: ")
    assert said.endswith(". Try again.")
    assert REMOVED in said
    # What is left of the form gives away at most two bytes of the key (base64's last group).
    left = said.removeprefix("401: Incorrect API key provided: ").removesuffix(". Try again.").replace(REMOVED, "")
    assert len(left) <= 16


@pytest.mark.parametrize("form", list(forms_of(KEY)))
def test_no_long_run_of_the_key_survives_in_any_form(form):
    said = redact(forms_of(KEY)[form], [KEY])
    decoded = said
    for decode in (urllib.parse.unquote, lambda t: "".join(c for c in t if c.isalnum())):
        decoded = decode(decoded)
    assert KEY[:12].replace("-", "") not in decoded.lower()
    assert KEY[-12:] not in decoded


def test_every_occurrence_is_removed():
    text = f"a {KEY} b {' '.join(KEY)} c {base64.b64encode(KEY.encode()).decode().rstrip('=')} d"
    assert redact(text, [KEY]) == f"a {REMOVED} b {REMOVED} c {REMOVED} d"


def test_ordinary_text_is_left_alone():
    text = "The model `gpt-4.1` does not exist; 100% of 20 calls failed (see %2F docs)\\n."
    assert redact(text, [KEY]) == text


def test_short_values_are_no_keys():
    assert redact("unused and un used", ["unused"]) == "unused and un used"


def test_a_fragment_of_the_key_is_removed():
    assert redact(f"key={KEY[:16]}...", [KEY]) == f"key={REMOVED}..."


@pytest.mark.parametrize("form", ["spaced", "zero-width", "base64", "%-encoded whole", "hex"])
def test_a_form_cut_short_loses_its_fragment_too(form):
    # A provider message is kept to a few hundred characters: the cut may fall inside the key.
    echoed = forms_of(KEY)[form]
    cut = echoed[: len(echoed) // 2]
    said = redact(f"Incorrect API key provided: {cut}", [KEY])
    assert said == f"Incorrect API key provided: {REMOVED}"


def test_hashes_and_other_encoded_text_are_left_alone():
    text = (
        "template sha256 2adffd51a8b1c1e2f3d4c5b6a7980f1e2d3c4b5a69788766554433221100ffee, "
        f"batch {base64.b64encode(b'another value entirely, not the key').decode()}"
    )
    assert redact(text, [KEY]) == text


def test_it_takes_linear_time_on_long_hostile_text():
    keyish = ("s-k " * 250_000)[:1_000_000]
    started = time.perf_counter()
    for text in (keyish, "%2" * 500_000, "a" * 1_000_000):
        assert redact(text, [KEY]) == text
    took = time.perf_counter() - started
    doubled = time.perf_counter()
    for text in (keyish * 2, "%2" * 1_000_000, "a" * 2_000_000):
        redact(text, [KEY])
    assert time.perf_counter() - doubled < 4 * took + 1  # twice the text, about twice the time


# --- on the real HTTP path --------------------------------------------------------------------------


def _researcher_client(prefix: str) -> tuple[Client, APIClient]:
    user = person(f"{prefix}-researcher", Physician.Role.RESEARCHER)
    web = Client()
    web.force_login(user)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return web, api


@pytest.mark.django_db
@pytest.mark.parametrize("form", sorted(ECHO_FORMS))
def test_a_key_echoed_in_any_form_is_in_no_stored_field_page_api_answer_or_log_line(
    form, make_llm_server, settings, monkeypatch, caplog
):
    monkeypatch.setattr(llm, "DEFAULT_RETRY", llm.RetryPolicy(base_delay=0.01, max_delay=0.05))
    settings.ENDPOINT_KEY_VARIABLES = ["HB_ECHO_KEY"]
    monkeypatch.setenv("HB_ECHO_KEY", KEY)
    server = make_llm_server(api_key="sk-the-right-one-000000000000", echo_key=form)
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    caplog.set_level(logging.INFO)
    grader = endpoint_on(server, key_variable="HB_ECHO_KEY")
    run = run_launch(spec=RunRequest(name="run", grader=grader, responses_from=source))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert set(server.authorizations) == {f"Bearer {KEY}"}  # it was sent, and echoed back
    assert run.status == Run.Status.FAILED
    assert "Incorrect API key provided: Bearer [key removed]" in run.error
    web, api = _researcher_client(form)
    stored = [*Run.objects.values_list("error", flat=True), *run.batches.values_list("error", flat=True)]
    stored += list(Grade.objects.values_list("error", flat=True))
    shown = [
        web.get(reverse("run_detail", args=[run.code])).content.decode(),
        json.dumps(api.get(f"/api/runs/{run.name}/").json()),
        json.dumps(api.get(f"/api/runs/{run.name}/grades/").json()),
    ]
    logged = [TextFormatter().format(r) for r in caplog.records] + [JsonFormatter().format(r) for r in caplog.records]
    assert any("Incorrect API key provided" in line for line in logged)
    echoed = ECHO_FORMS[form](KEY)
    for text in stored + shown + logged:
        assert echoed not in text
        assert echoed[:20] not in text
        assert KEY[:20] not in text
