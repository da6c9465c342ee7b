"""One way into a run: the launch page, the API, `manage.py grade` and the meta-eval page's
comparison build the same RunRequest from the same inputs (grading.pipeline.run_request), and
the runs they store are the same but for their names, the template's hash included."""

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Physician
from grading.api import RunCreateSerializer
from grading.management.commands.grade import Command as GradeCommand
from grading.metaeval.grader_labels import grader_labels_import
from grading.metaeval.importer import meta_eval_import
from grading.metaeval.views import GraderComparisonLaunchForm
from grading.models import GraderTemplate, Run
from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE, template_hash
from grading.pipeline.grader_templates import grader_template_save
from grading.pipeline.run_request import RunRequest, RunSpecError, run_request
from grading.pipeline.views import RunForm
from tests.endpoints import endpoint_on
from tests.metaeval_rows import CATEGORY, grader_rows_for, lines, meta_row
from tests.people import person

pytest_plugins = ["tests.llm_server"]
pytestmark = pytest.mark.django_db

WINDOWS_TEMPLATE = "Judge the reply.\r\n\r\n<<conversation>>\r\n\r\nItem: <<rubric_item>>\r\n"
TEMPLATE = "Judge the reply.\n\n<<conversation>>\n\nItem: <<rubric_item>>"


@pytest.fixture
def source(llm_server) -> Run:
    """A run whose four items physicians labelled (so the meta-eval page offers it), a grader
    endpoint and a stored template."""
    rows = [meta_row("p-1", f"c-{i}", CATEGORY, labels=(i % 2 == 0,) * 2) for i in range(4)]
    meta_eval_import(lines=lines(*rows))
    grader_labels_import(lines=lines(*grader_rows_for(rows, [True] * 4)), run_name="labelled")
    endpoint_on(llm_server)
    grader_template_save(name="own", text=TEMPLATE)
    return Run.objects.get(name="labelled")


# --- the four doors, each as it builds its request -------------------------------------------


def page_request(**fields) -> RunRequest:
    form = RunForm(fields)
    assert form.is_valid(), form.errors
    return form.launch_request()


def api_request(**fields) -> RunRequest:
    form = RunCreateSerializer(data=fields)
    assert form.is_valid(), form.errors
    return form.launch_request()


def command_request(*args: str) -> RunRequest:
    command = GradeCommand()
    options = vars(command.create_parser("manage.py", "grade").parse_args(list(args)))
    return command.launch_request(options)


def metaeval_requests(offered: Run, **fields) -> list[RunRequest]:
    form = GraderComparisonLaunchForm(fields, sources=[offered])
    assert form.is_valid(), form.errors
    return form.launch_requests("stamp")


def page_fields(source: Run, name: str, **changes) -> dict:
    return {
        "name": name,
        "source": "responses",
        "responses_from": str(source.code),
        "grader": "test-grader",
        "grading_mode": "per-response",
        "explanation_length": "words",
        "concurrency": "16",
        "samples": "1",
        "use_cache": "on",
        **changes,
    }


def api_fields(source: Run, name: str, **changes) -> dict:
    fields = {
        "name": name,
        "responses_from": source.name,
        "grader": "test-grader",
        "grading_mode": "per-response",
        "explanation_length": "words",
    }
    return fields | changes


def command_args(source: Run, name: str, *more: str) -> list[str]:
    return [
        "--name",
        name,
        "--grader",
        "test-grader",
        "--responses-from",
        source.name,
        "--grading-mode",
        "per-response",
        "--explanation",
        "words",
        *more,
    ]


def test_a_windows_template_gives_the_same_request_through_the_page_the_api_and_the_command(source, tmp_path):
    template_file = Path(tmp_path / "template.txt")
    template_file.write_bytes(WINDOWS_TEMPLATE.encode())
    page = page_request(**page_fields(source, "same", grader_template=WINDOWS_TEMPLATE))
    api = api_request(**api_fields(source, "same", grader_template=WINDOWS_TEMPLATE))
    command = command_request(*command_args(source, "same", "--grader-template", str(template_file)))
    assert page == api == command
    assert page.template == TEMPLATE
    assert (page.grading_mode, page.explanation_length, page.concurrency, page.use_cache) == (
        "per-response",
        "words",
        16,
        True,
    )


def test_a_stored_template_gives_the_same_request_through_all_four_doors(source):
    (metaeval,) = metaeval_requests(
        source,
        source=str(source.code),
        grader="test-grader",
        modes=["per-response"],
        explanation_length="words",
        stored_template="own",
    )
    name = metaeval.name
    page = page_request(**page_fields(source, name, stored_template="own"))
    api = api_request(**api_fields(source, name, stored_template="own"))
    command = command_request(*command_args(source, name, "--template", "own"))
    assert page == api == command == metaeval
    assert metaeval.template == GraderTemplate.objects.get(name="own").text


def test_the_defaults_are_the_same_everywhere(source):
    (metaeval,) = metaeval_requests(
        source, source=str(source.code), grader="test-grader", modes=["per-criterion"], explanation_length="words"
    )
    name = metaeval.name
    page = page_request(**page_fields(source, name, grading_mode="per-criterion"))
    api = api_request(
        **{k: v for k, v in api_fields(source, name).items() if "explanation" not in k and "mode" not in k}
    )
    command = command_request("--name", name, "--grader", "test-grader", "--responses-from", source.name)
    assert page == api == command == metaeval
    assert (page.template, page.grading_mode, page.explanation_length) == (DEFAULT_TEMPLATE, "per-criterion", "")


def test_a_template_and_a_stored_one_together_are_refused(source):
    with pytest.raises(RunSpecError, match="not both"):
        run_request(name="x", grader=None, template=TEMPLATE, stored_template=GraderTemplate.objects.get(name="own"))
    refused = APIClient()
    token = Token.objects.create(user=person("api", Physician.Role.RESEARCHER))
    refused.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    answer = refused.post(
        "/api/runs/", api_fields(source, "both", grader_template=TEMPLATE, stored_template="own"), format="json"
    )
    assert answer.status_code == 400
    assert "not both" in str(answer.json())


# --- and the runs they store -----------------------------------------------------------------


STORED_FIELDS = (
    "plan",
    "plan_rubric",
    "status",
    "grader_config_id",
    "policy_config_id",
    "policy_model",
    "samples",
    "use_cache",
    "length_adjusted",
    "healthbench_professional",
    "batch",
    "responses_from_id",
    "subset_id",
    "subset_version_id",
    "concurrency",
    "total_items",
)


def stored(run: Run) -> dict:
    return {field: getattr(run, field) for field in STORED_FIELDS}


def test_the_four_doors_store_the_same_run(source, client):
    client.force_login(person("page", Physician.Role.RESEARCHER))
    launched = client.post(
        reverse("graders_comparison_launch"),
        {"source": source.code, "grader": "test-grader", "modes": ["per-response"], "explanation_length": "words"}
        | {"stored_template": "own"},
    )
    assert launched.status_code == 302
    from_metaeval = Run.objects.exclude(id=source.id).get()
    page = client.post(reverse("run_new"), page_fields(source, "page", stored_template="own", action="launch"))
    assert page.status_code == 302, page.content.decode()[:2000]
    api = APIClient()
    api.force_authenticate(person("api", Physician.Role.RESEARCHER))
    created = api.post("/api/runs/", api_fields(source, "api", stored_template="own"), format="json")
    assert created.status_code == 201, created.json()
    call_command("grade", *command_args(source, "command", "--template", "own"), stdout=io.StringIO())
    runs = [from_metaeval, *(Run.objects.get(name=name) for name in ("page", "api", "command"))]
    assert [stored(run) for run in runs] == [stored(from_metaeval)] * 4
    config = from_metaeval.grader_config
    assert config is not None
    assert config.prompt_hash == template_hash(TEMPLATE) == GraderTemplate.objects.get(name="own").sha256
    assert (config.grading_mode, config.explanation_length) == ("per-response", "words")
