"""Azure OpenAI (classic deployment URLs with an api-version and the api-key header, the v1 API,
an Entra ID token) and gateways' own headers and query parameters, over real HTTP against the
test server, which serves Azure's paths (tests/llm_server.py): how the curator's form reads
them, and runs that grade through them."""

import json
import time
from io import StringIO

import pytest
from django.core.management import call_command

from grading.endpoint_access import AccessError, parse_pairs
from grading.endpoints.forms import EndpointForm
from grading.models import Endpoint, Grade, Run
from grading.pipeline import client as llm
from grading.pipeline.batches import batch_run
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from tests.grading_data import imported_run

pytest_plugins = ["tests.llm_server"]
pytestmark = pytest.mark.django_db

KEY = "azure-key-0123456789abcdefghijklmnop"
GATEWAY_KEY = "gw-key-0123456789abcdefghijklmnopq"


@pytest.fixture(autouse=True)
def keys(settings, monkeypatch):
    monkeypatch.setattr(llm, "DEFAULT_RETRY", llm.RetryPolicy(base_delay=0.01, max_delay=0.05))
    settings.ENDPOINT_KEY_VARIABLES = ["AZURE_OPENAI_API_KEY", "GATEWAY_KEY"]
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GATEWAY_KEY", GATEWAY_KEY)


def root(server) -> str:
    return server.url.removesuffix("/v1")


def form(**values) -> EndpointForm:
    data = {
        "name": "azure",
        "provider": "openai",
        "api_style": "chat",
        "model": "",
        "key_variable": "AZURE_OPENAI_API_KEY",
        "temperature": "0",
        "max_output_tokens": "2048",
        "timeout_seconds": "60",
    }
    return EndpointForm(data=data | values)


def graded(endpoint: Endpoint, **changes) -> Run:
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    run = run_launch(spec=RunRequest(name="run", grader=endpoint, responses_from=source, **changes))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    return run


# --- the curator's form ----------------------------------------------------------------------------


def test_a_deployment_url_as_the_portal_shows_it_is_read_as_azure_classic():
    url = "https://contoso.openai.azure.com/openai/deployments/my-gpt41/chat/completions?api-version=2024-10-21"
    refused = form(base_url=url)
    assert not refused.is_valid()
    assert "This is an Azure OpenAI deployment URL: choose Azure OpenAI" in refused.errors["base_url"][0]
    taken = form(base_url=url, provider="azure")
    assert taken.is_valid(), taken.errors
    endpoint = taken.save()
    assert (endpoint.base_url, endpoint.model, endpoint.api_version) == (
        "https://contoso.openai.azure.com",
        "my-gpt41",
        "2024-10-21",
    )
    assert "resource https://contoso.openai.azure.com, deployment my-gpt41" in taken.warnings[0]


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        ({"base_url": "https://contoso.openai.azure.com/openai", "api_version": "2024-10-21"}, "base_url",
         "the base URL is the resource alone"),
        ({"base_url": "https://contoso.openai.azure.com", "api_version": ""}, "base_url",
         "without an api-version, the base URL is the v1 API's"),
        ({"base_url": "https://contoso.openai.azure.com", "api_version": "latest"}, "api_version",
         "'latest' is not an api-version"),
    ],
)  # fmt: skip
def test_an_azure_endpoint_says_what_its_url_or_version_lacks(values, field, words):
    refused = form(provider="azure", model="dep", **values)
    assert not refused.is_valid()
    assert words in refused.errors[field][0]


def test_the_v1_url_needs_no_version_and_a_plain_endpoint_takes_none():
    assert form(provider="azure", model="dep", base_url="https://c.openai.azure.com/openai/v1").is_valid()
    plain = form(model="m", base_url="https://api.example.com/v1", api_version="2024-10-21")
    assert not plain.is_valid()
    assert "Only Azure OpenAI's classic API takes an api-version" in plain.errors["api_version"][0]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Authorization: Bearer sk-typed", "looks like a credential: give it as env:VARIABLE"),
        ("X-Portkey-Api-Key: pk-typed", "looks like a credential"),
        ("X-Token: env:SECRET_KEY", "SECRET_KEY"),
        ("Host: evil.example", "set by the client itself"),
        ("Bad Name: x", "is not a valid header name"),
        ("X-Title", "write it as 'Name: value'"),
        ("X-Title: a\nx-title: b", "given twice"),
    ],
)
def test_extra_headers_refuse_typed_secrets_and_headers_that_change_the_request(text, words):
    with pytest.raises(AccessError, match=words):
        parse_pairs(text, what="Extra headers", header=True)
    refused = form(model="m", base_url="https://gw.example.com/v1", extra_headers_text=text)
    assert not refused.is_valid()
    assert "extra_headers_text" in refused.errors


def test_extra_headers_and_query_parameters_are_saved_and_shown_again():
    saved = form(
        model="m",
        base_url="https://gw.example.com/v1",
        extra_headers_text="HTTP-Referer: https://hospital.example\nX-Title: HealthBench\nX-Gw-Auth: env:GATEWAY_KEY",
        extra_query_text="team: health",
    )
    assert saved.is_valid(), saved.errors
    endpoint = saved.save()
    assert endpoint.extra_headers == {
        "HTTP-Referer": "https://hospital.example",
        "X-Title": "HealthBench",
        "X-Gw-Auth": "env:GATEWAY_KEY",
    }
    assert endpoint.extra_query == {"team": "health"}
    again = EndpointForm(instance=endpoint)
    assert "X-Gw-Auth: env:GATEWAY_KEY" in again.initial["extra_headers_text"]


# --- runs through them -----------------------------------------------------------------------------


def test_an_azure_classic_endpoint_grades_through_deployment_urls_with_the_api_key_header(make_llm_server):
    server = make_llm_server(api_key=KEY)
    endpoint = Endpoint.objects.create(
        name="azure",
        provider="azure",
        base_url=root(server),
        api_version="2024-10-21",
        model="my-gpt41",
        key_variable="AZURE_OPENAI_API_KEY",
        timeout_seconds=5,
    )
    run = graded(endpoint)
    assert run.status == Run.Status.DONE, run.error
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED).count() == 6
    paths = {path for path, _ in server.received}
    assert paths == {"/openai/deployments/my-gpt41/chat/completions?api-version=2024-10-21"}
    headers = [seen for _, seen in server.received]
    assert all(seen.get("api-key") == KEY for seen in headers)
    assert not any("authorization" in seen for seen in headers)
    said = StringIO()
    call_command("endpoint", "check", "azure", stdout=said, stderr=StringIO())
    assert said.getvalue().rstrip().endswith("azure works.")
    # Its Batch API, tried by the check: a one-line file and a batch, cancelled at once.
    server.batches.validating_seconds = 2.0
    Endpoint.objects.filter(id=endpoint.id).update(batch_discount=0.5)
    said = StringIO()
    call_command("endpoint", "check", "azure", "--batch", stdout=said, stderr=StringIO())
    assert "for /chat/completions, cancelled it (cancelling)" in said.getvalue()
    assert (server.batches.created, server.batches.cancels) == (1, 1)
    assert "/openai/files?api-version=2024-10-21" in {path for path, _ in server.received}


def test_an_entra_id_token_goes_as_a_bearer_token_to_azure_classic(make_llm_server):
    server = make_llm_server(api_key=KEY)  # the server takes the token as it takes the key
    endpoint = Endpoint.objects.create(
        name="azure-entra",
        provider="azure",
        base_url=root(server),
        api_version="2024-10-21",
        model="my-gpt41",
        key_variable="AZURE_OPENAI_API_KEY",
        key_header="Authorization",
        timeout_seconds=5,
    )
    run = graded(endpoint)
    assert run.status == Run.Status.DONE, run.error
    headers = [seen for _, seen in server.received]
    assert all(seen.get("authorization") == f"Bearer {KEY}" for seen in headers)
    assert not any("api-key" in seen for seen in headers)


def test_the_azure_v1_api_grades_with_its_openai_compatible_paths(make_llm_server):
    server = make_llm_server(api_key=KEY)
    endpoint = Endpoint.objects.create(
        name="azure-v1",
        provider="azure",
        base_url=root(server) + "/openai/v1",
        model="my-gpt41",
        key_variable="AZURE_OPENAI_API_KEY",
        api_style="responses",
        timeout_seconds=5,
    )
    run = graded(endpoint)
    assert run.status == Run.Status.DONE, run.error
    assert {path for path, _ in server.received} == {"/openai/v1/responses"}


def test_a_gateway_gets_its_headers_query_and_key_header_and_no_bearer_token(make_llm_server):
    server = make_llm_server()
    endpoint = Endpoint.objects.create(
        name="gateway",
        base_url=server.url,
        model="grader",
        key_variable="GATEWAY_KEY",
        key_header="x-gateway-key",
        extra_headers={"HTTP-Referer": "https://hospital.example", "X-Org-Token": "env:AZURE_OPENAI_API_KEY"},
        extra_query={"team": "health"},
        timeout_seconds=5,
    )
    run = graded(endpoint)
    assert run.status == Run.Status.DONE, run.error
    for path, seen in server.received:
        assert path == "/v1/chat/completions?team=health"
        assert seen["x-gateway-key"] == GATEWAY_KEY
        assert seen["http-referer"] == "https://hospital.example"
        assert seen["x-org-token"] == KEY
        assert "authorization" not in seen
    assert run.grader_config.extra_headers["X-Org-Token"] == "env:AZURE_OPENAI_API_KEY"  # never the value


def test_a_header_whose_variable_is_off_the_allowlist_fails_the_run_before_any_call(make_llm_server, settings):
    server = make_llm_server()
    endpoint = Endpoint.objects.create(
        name="gateway",
        base_url=server.url,
        model="grader",
        key_variable="",
        extra_headers={"X-Org-Token": "env:GATEWAY_KEY"},
        timeout_seconds=5,
    )
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    run = run_launch(spec=RunRequest(name="run", grader=endpoint, responses_from=source))
    settings.ENDPOINT_KEY_VARIABLES = ["AZURE_OPENAI_API_KEY"]  # the operator took it off since
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "GATEWAY_KEY" in run.error
    assert server.calls == 0


def test_an_azure_classic_endpoint_grades_through_its_batch_api(make_llm_server, settings):
    settings.GRADING_BATCH_POLL_SECONDS = 0.05
    server = make_llm_server(api_key=KEY)
    server.batches.validating_seconds = server.batches.finalizing_seconds = 0.02
    endpoint = Endpoint.objects.create(
        name="azure-batch",
        provider="azure",
        base_url=root(server),
        api_version="2024-10-21",
        model="gpt-41-global-batch",
        key_variable="AZURE_OPENAI_API_KEY",
        batch_discount="0.5",
        timeout_seconds=5,
    )
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    run = run_launch(spec=RunRequest(name="batched", grader=endpoint, responses_from=source, batch=True))
    deadline = time.monotonic() + 20
    while run.status == Run.Status.RUNNING:
        for batch_id in list(run.batches.filter(status="queued").values_list("id", flat=True)):
            batch_run(batch_id=batch_id)
        run.refresh_from_db()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert run.status == Run.Status.DONE, run.error
    assert Grade.objects.filter(run=run, status=Grade.Status.GRADED, batched=True).count() == 6
    paths = [path.partition("?") for path, _ in server.received]
    assert {path for path, _, _ in paths} >= {"/openai/files", "/openai/batches"}
    assert all(query == "api-version=2024-10-21" for _, _, query in paths)
    assert all(seen.get("api-key") == KEY for _, seen in server.received)
    uploads = [f for f in server.batches.files.values() if f.purpose == "batch"]
    lines = [json.loads(line) for f in uploads for line in f.data.decode().splitlines()]
    assert lines
    assert all(line["url"] == "/chat/completions" for line in lines)
    assert all(line["body"]["model"] == "gpt-41-global-batch" for line in lines)
