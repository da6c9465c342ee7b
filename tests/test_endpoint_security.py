"""No choice a researcher can make sends the value of an environment variable, except an
allowlisted key, to any URL but a configured endpoint's: tried through the API, the web
form and the command line, and at the worker behind them. Plus the operator's settings,
the curator's endpoint page (policy, presets) and the admin's warning."""

import io
import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Physician
from grading.endpoint_rules import base_url_problem, key_variable_problem
from grading.models import Endpoint, GraderConfig, Run
from grading.pipeline.batches import batch_run
from grading.pipeline.estimate import RunSpecError
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from tests.conftest import REPO
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run
from tests.people import person

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]

SECRETS = ("SECRET_KEY", "DATABASE_URL")


@pytest.fixture
def secrets(monkeypatch):
    """Values a worker must never send, set where it could read them."""
    values = {"SECRET_KEY": django_settings.SECRET_KEY, "DATABASE_URL": "postgres://admin:hunter2@db/prod"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def never_sent(server, secrets: dict) -> None:
    sent = " ".join(server.authorizations) + " ".join(str(body) for _, body in server.requests)
    for value in secrets.values():
        assert value not in sent


def api_client(role=Physician.Role.RESEARCHER) -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=person(f"api-{role}", role))
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def web_client(role=Physician.Role.RESEARCHER) -> Client:
    client = Client()
    client.force_login(person(f"web-{role}", role))
    return client


# --- the three doors ------------------------------------------------------------------------------


@pytest.mark.parametrize("variable", SECRETS)
def test_the_api_refuses_a_raw_url_or_key_variable_with_what_to_do(llm_server, secrets, variable):
    source = imported_run(conversations=1)
    endpoint_on(llm_server)
    for raw in (
        {"grader_api_key_env": variable, "grader_base_url": llm_server.url, "grader_model": "grader"},
        {"grader": "test-grader", "grader_api_key_env": variable},
        {"grader": "test-grader", "policy_base_url": "http://169.254.169.254/", "policy_api_key_env": variable},
    ):
        response = api_client().post("/api/runs/", {"name": "x", "responses_from": source.name, **raw}, format="json")
        assert response.status_code == 400
        body = response.json()
        assert all("name a grader endpoint" in body[field][0] for field in raw if field != "grader")
        Token.objects.all().delete()
        User.objects.all().delete()
    assert Run.objects.count() == 1
    assert llm_server.calls == 0
    never_sent(llm_server, secrets)


@pytest.mark.parametrize("variable", SECRETS)
def test_the_web_form_refuses_a_raw_url_or_key_variable(llm_server, secrets, variable):
    source = imported_run(conversations=1)
    endpoint_on(llm_server)
    data = {
        "name": "x",
        "source": "responses",
        "responses_from": str(source.code),
        "samples": "1",
        "grader": "test-grader",
        "concurrency": "4",
        "grader_base_url": llm_server.url,
        "grader_api_key_env": variable,
        "action": "launch",
    }
    response = web_client().post(reverse("run_new"), data)
    assert response.status_code == 400
    assert "name a grader endpoint" in response.content.decode()
    assert Run.objects.count() == 1
    assert llm_server.calls == 0
    never_sent(llm_server, secrets)


@pytest.mark.parametrize("variable", SECRETS)
def test_the_command_refuses_a_raw_url_or_key_variable(llm_server, secrets, variable):
    imported_run(name="imported", conversations=1)
    endpoint_on(llm_server)
    for option in ("--grader-api-key-env", "--policy-api-key-env"):
        with pytest.raises(CommandError, match="name a grader endpoint"):
            call_command(
                "grade",
                "--name",
                "x",
                "--grader",
                "test-grader",
                option,
                variable,
                "--grader-base-url",
                llm_server.url,
                "--responses-from",
                "imported",
                stdout=io.StringIO(),
            )
    assert Run.objects.count() == 1
    assert llm_server.calls == 0
    never_sent(llm_server, secrets)


@pytest.mark.parametrize("variable", SECRETS)
def test_an_endpoint_naming_a_reserved_variable_is_refused_at_launch_and_by_the_worker(
    llm_server, secrets, settings, variable
):
    # Say a database edit (or an old configuration) names it: neither door nor worker reads it.
    source = imported_run(conversations=1)
    endpoint = endpoint_on(llm_server, "leaky", key_variable=variable)
    with pytest.raises(RunSpecError, match=f"{variable} is one of this application's own settings"):
        run_launch(spec=RunRequest(name="x", grader=endpoint, responses_from=source))
    # Even on the allowlist (settings cannot put it there; a test can), the worker refuses.
    settings.ENDPOINT_KEY_VARIABLES = [variable]
    Endpoint.objects.filter(id=endpoint.id).update(key_variable="")
    run = run_launch(spec=RunRequest(name="x", grader=Endpoint.objects.get(id=endpoint.id), responses_from=source))
    GraderConfig.objects.filter(runs=run).update(api_key_env=variable)
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert f"{variable} is one of this application's own settings" in run.error
    assert llm_server.calls == 0
    never_sent(llm_server, secrets)


def test_an_allowlisted_key_goes_only_to_its_endpoint(make_llm_server, secrets, settings, monkeypatch):
    settings.ENDPOINT_KEY_VARIABLES = ["HB_PROVIDER_KEY"]
    monkeypatch.setenv("HB_PROVIDER_KEY", "sk-provider")
    server = make_llm_server(api_key="sk-provider")
    bystander = make_llm_server()
    source = imported_run(conversations=1, samples=1)
    grader = endpoint_on(server, key_variable="HB_PROVIDER_KEY")
    run = run_launch(spec=RunRequest(name="x", grader=grader, responses_from=source))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert set(server.authorizations) == {"Bearer sk-provider"}
    assert bystander.calls == 0
    never_sent(server, secrets)


# --- the operator's settings ------------------------------------------------------------------------


def _load_settings(tmp_path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    clean.update({"VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "healthbench_web.settings", **env})
    code = "import django; django.setup(); from django.conf import settings; print(settings.ENDPOINT_KEY_VARIABLES)"
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=clean, capture_output=True, text=True)


@pytest.mark.parametrize(
    "name", ["SECRET_KEY", "DATABASE_URL", "REDIS_URL", "EMAIL_HOST_PASSWORD", "CELERY_BROKER_URL"]
)
def test_start_up_stops_when_the_allowlist_names_a_setting(tmp_path, name):
    done = _load_settings(tmp_path, ENDPOINT_KEY_VARIABLES=f"OPENAI_API_KEY,{name}")
    assert done.returncode != 0
    assert f"ENDPOINT_KEY_VARIABLES may not name {name}" in done.stderr


def test_the_allowlist_is_read_from_the_environment(tmp_path):
    done = _load_settings(tmp_path, ENDPOINT_KEY_VARIABLES="OPENAI_API_KEY, ANTHROPIC_API_KEY")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['OPENAI_API_KEY', 'ANTHROPIC_API_KEY']"


def test_a_key_variable_off_the_allowlist_is_refused_with_what_to_do(settings):
    settings.ENDPOINT_KEY_VARIABLES = ["OPENAI_API_KEY"]
    assert key_variable_problem("OPENAI_API_KEY") is None
    assert key_variable_problem("") is None
    assert "not on the operator's allowlist ENDPOINT_KEY_VARIABLES" in str(key_variable_problem("HOME"))


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://169.254.169.254/latest/meta-data", "link-local or cloud metadata"),
        ("http://metadata.google.internal/v1", "cloud metadata service"),
        ("http://[fe80::1]/v1", "link-local"),
        ("http://[::ffff:169.254.169.254]/v1", "link-local"),
        ("http://127.0.0.1:8001/v1", "loopback or private-network address"),
        ("http://10.1.2.3/v1", "loopback or private-network address"),
        ("http://localhost:8001/v1", "loopback or private-network address"),
        ("ftp://example.com/v1", "must start with http:// or https://"),
        ("https://user:pw@api.openai.com/v1", "may not carry a user name or password"),
        # Numeric and hexadecimal IPv4 forms, read as the resolver reads them.
        ("http://2852039166/v1", "link-local or cloud metadata address (169.254.169.254)"),
        ("http://0xa9fea9fe/v1", "link-local or cloud metadata address (169.254.169.254)"),
        ("http://0251.0376.0251.0376/v1", "link-local or cloud metadata address (169.254.169.254)"),
        ("http://169.254.43518/v1", "link-local or cloud metadata address (169.254.169.254)"),
        ("http://127.1:8001/v1", "loopback or private-network address"),
        ("http://0/v1", "not a unicast address"),
        # IPv6 addresses that carry a forbidden IPv4 address.
        ("http://[2002:a9fe:a9fe::1]/v1", "link-local or cloud metadata address, inside the IPv6 address"),
        ("http://[64:ff9b::a9fe:a9fe]/v1", "link-local or cloud metadata address, inside the IPv6 address"),
        ("http://[::a9fe:a9fe]/v1", "link-local or cloud metadata address, inside the IPv6 address"),
        ("http://[::ffff:10.0.0.1]/v1", "loopback or private-network address"),
        ("http://[2002:0a00:0001::]/v1", "loopback or private-network address"),
        ("http://[::1]:8001/v1", "loopback or private-network address"),
        ("http://evil.example\\@api.openai.com/v1", "a backslash"),
        ("http://a%2eb/v1", "neither a host name nor an IP address"),
    ],
)
def test_the_url_policy_refuses_metadata_link_local_and_by_default_private_addresses(settings, url, problem):
    settings.ENDPOINT_ALLOW_PRIVATE_NETWORKS = False
    assert problem in str(base_url_problem(url))


@pytest.mark.parametrize("url", ["http://2852039166/v1", "http://[2002:a9fe:a9fe::1]/v1", "http://0xa9fea9fe/"])
def test_the_launch_check_reads_hosts_as_the_worker_does(llm_server, settings, url):
    settings.ENDPOINT_ALLOW_PRIVATE_NETWORKS = True  # never enough for a metadata address
    source = imported_run(conversations=1)
    grader = Endpoint.objects.create(name="numeric", base_url=url, model="grader", key_variable="")
    with pytest.raises(RunSpecError, match="link-local or cloud metadata address"):
        run_launch(spec=RunRequest(name="x", grader=grader, responses_from=source))
    assert base_url_problem(url, resolve=False) == base_url_problem(url, resolve=True)


def test_loopback_ipv6_follows_the_private_networks_setting(settings, make_llm_server):
    try:
        server = make_llm_server(host="::1")
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    settings.ENDPOINT_ALLOW_PRIVATE_NETWORKS = True
    assert base_url_problem(server.url) is None
    assert base_url_problem("http://[2002:7f00:1::]/v1") is None
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    run = run_launch(spec=RunRequest(name="v6", grader=endpoint_on(server), responses_from=source))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert server.calls == 2
    settings.ENDPOINT_ALLOW_PRIVATE_NETWORKS = False
    assert "loopback or private-network address" in str(base_url_problem(server.url))


def test_private_networks_and_allowed_hosts_are_the_operators_choice(settings):
    settings.ENDPOINT_ALLOW_PRIVATE_NETWORKS = True
    assert base_url_problem("http://127.0.0.1:8001/v1") is None
    assert "link-local" in str(base_url_problem("http://169.254.169.254/"))  # never, whatever the setting
    settings.ENDPOINT_ALLOWED_HOSTS = ["*.openai.azure.com", "127.0.0.1"]
    assert base_url_problem("http://127.0.0.1:8001/v1") is None
    assert "not on ENDPOINT_ALLOWED_HOSTS" in str(base_url_problem("http://10.0.0.1/v1"))


def test_the_worker_refuses_a_url_the_policy_forbids(llm_server, settings):
    source = imported_run(conversations=1)
    run = run_launch(spec=RunRequest(name="x", grader=endpoint_on(llm_server), responses_from=source))
    settings.ENDPOINT_ALLOW_PRIVATE_NETWORKS = False  # the operator tightened the policy since
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "loopback or private-network address" in run.error
    assert llm_server.calls == 0


# --- the curator's page -----------------------------------------------------------------------------


def test_a_curator_adds_the_healthbench_professional_grader_from_its_preset():
    client = web_client(Physician.Role.CURATOR)
    page = client.get(reverse("endpoint_new") + "?preset=healthbench-professional").content.decode()
    assert 'value="gpt-5.4-2026-03-05"' in page
    assert 'value="responses" selected' in page
    assert 'value="low" selected' in page
    assert 'name="max_output_tokens" min="0" aria-describedby' in page
    form = {
        "name": "pro",
        "api_style": "responses",
        "model": "gpt-5.4-2026-03-05",
        "key_variable": "OPENAI_API_KEY",
        "reasoning": "on",
        "reasoning_effort": "low",
        "temperature": "",
        "max_output_tokens": "",
        "timeout_seconds": "120",
        "price_input": "1.25",
        "price_output": "10",
    }
    response = client.post(reverse("endpoint_new"), form)
    assert response.status_code == 302, response.content.decode()
    pro = Endpoint.objects.get(name="pro")
    assert (pro.api_style, pro.reasoning, pro.reasoning_effort, pro.temperature) == ("responses", True, "low", None)
    assert (pro.max_output_tokens, pro.structured_output, pro.system_message) == (None, False, "")


def test_the_original_grader_preset_is_chat_at_the_reference_temperature():
    page = web_client(Physician.Role.CURATOR).get(reverse("endpoint_new") + "?preset=healthbench-original")
    text = page.content.decode()
    assert 'value="gpt-4.1-2025-04-14"' in text
    assert 'value="chat" selected' in text
    assert 'name="temperature" value="0.5"' in text
    assert "You are a helpful assistant." in text


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"key_variable": "SECRET_KEY"}, "Select a valid choice"),
        ({"base_url": "http://169.254.169.254/v1"}, "link-local or cloud metadata"),
        ({"reasoning": "", "reasoning_effort": "low"}, "Only reasoning models take a reasoning effort"),
    ],
)
def test_the_endpoint_form_refuses_what_the_policy_forbids(changes, message, settings):
    settings.ENDPOINT_ALLOW_PRIVATE_NETWORKS = False
    form = {
        "name": "bad",
        "api_style": "chat",
        "model": "m",
        "key_variable": "OPENAI_API_KEY",
        "temperature": "0",
        "max_output_tokens": "100",
        "timeout_seconds": "10",
        "reasoning": "on",
        **changes,
    }
    response = web_client(Physician.Role.CURATOR).post(reverse("endpoint_new"), form)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Endpoint.objects.exists()


def test_researchers_read_the_endpoint_list_but_cannot_add_or_edit(llm_server):
    endpoint = endpoint_on(llm_server, price_input=1, price_output=2)
    client = web_client()
    page = client.get(reverse("endpoint_list")).content.decode()
    assert "test-grader" in page
    assert reverse("endpoint_edit", args=[endpoint.code]) not in page
    assert client.get(reverse("endpoint_new")).status_code == 403
    assert client.post(reverse("endpoint_edit", args=[endpoint.code]), {"name": "x"}).status_code == 403
    assert web_client(Physician.Role.PHYSICIAN).get(reverse("endpoint_list")).status_code == 403


def test_an_endpoint_off_the_allowlist_is_flagged_for_curators_and_in_the_admin(llm_server):
    endpoint_on(llm_server, "old", key_variable="LEGACY_KEY")
    page = web_client(Physician.Role.CURATOR).get(reverse("endpoint_list")).content.decode()
    assert "old: the key variable LEGACY_KEY is not on the operator&#x27;s allowlist" in page
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw"))
    changelist = admin.get("/admin/grading/endpoint/").content.decode()
    assert "Old: the key variable LEGACY_KEY is not on the operator&#x27;s allowlist" in changelist


def test_the_endpoint_form_refuses_a_temperature_on_a_reasoning_model_beside_the_field():
    client = web_client(Physician.Role.CURATOR)
    form = {
        "name": "o-grader",
        "api_style": "chat",
        "model": "o4-mini",
        "reasoning": "on",
        "temperature": "0.7",
        "max_output_tokens": "2048",
        "timeout_seconds": "60",
    }
    response = client.post(reverse("endpoint_new"), form)
    page = response.content.decode()
    assert response.status_code == 400
    assert not Endpoint.objects.filter(name="o-grader").exists()
    assert "Reasoning models take no temperature" in page
    assert 'href="#id_temperature"' in page


def test_a_reasoning_model_name_saved_without_reasoning_is_warned_about():
    client = web_client(Physician.Role.CURATOR)
    form = {
        "name": "g5",
        "api_style": "chat",
        "model": "gpt-5-mini",
        "max_output_tokens": "2048",
        "timeout_seconds": "60",
    }
    page = client.post(reverse("endpoint_new"), form, follow=True).content.decode()
    assert Endpoint.objects.filter(name="g5", reasoning=False).exists()
    assert "gpt-5-mini looks like a reasoning model, but Reasoning is not ticked" in page


def test_a_reasoning_model_posted_without_a_temperature_field_is_saved_with_none():
    # A script or an old page that leaves the field out, rather than sending it empty: the
    # model's default (0.0) must not be saved for a reasoning model, which refuses any temperature.
    client = web_client(Physician.Role.CURATOR)
    form = {
        "name": "o-script",
        "api_style": "responses",
        "model": "o4-mini",
        "reasoning": "on",
        "max_output_tokens": "2048",
        "timeout_seconds": "60",
    }
    response = client.post(reverse("endpoint_new"), form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Endpoint.objects.get(name="o-script").temperature is None
