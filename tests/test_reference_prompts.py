"""The grader prompts a run sends are, byte for byte, those simple-evals sends (issue 27).

The reference's grader template is imported from the checkout ($SIMPLE_EVALS_DIR) as a user
would (`grader_template import --simple-evals`), and a run of each kind is graded with it on the
test server. The reference's own code is then run on the same conversations, responses and
criteria, its grader calls going to the same server: `HealthBenchEval.grade_sample` for a
sampled run (with the conversation its sampler sent: the system message first) and for a run on
existing responses (its physician-completions mode: the dataset conversation), and
`HealthBenchMetaEval.__call__` for a run of the physician-labelled items (the bare rubric
text). The prompts must be the same bytes, and the report must say "reference grader prompt";
a run filled the earlier way says "custom grader prompt" and why.
"""

import io
import json
import types
import urllib.request

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotation.models import Physician
from grading.metaeval.importer import meta_eval_import
from grading.metaeval.report import report_csv, run_meta_eval_report
from grading.models import Endpoint, Grade, Response, Run
from grading.reports.report import run_report
from grading.reports.run_export import run_export
from tests.endpoints import endpoint_on
from tests.grading_data import conversation_with_rubric, imported_run, subset_of
from tests.metaeval_rows import CATEGORY, OTHER_CATEGORY, lines, meta_row
from tests.people import person
from tests.simple_evals import reference_modules, simple_evals_dir

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

SYSTEM = "You are a helpful assistant."
SCHEMA = {"type": "json_schema", "json_schema": {"name": "grade", "schema": {"type": "object"}}}


class ReferenceSampler:
    """The grader of the reference's own code: each message list it is given goes to the test
    server as a Chat Completions call, and is kept."""

    def __init__(self, server, reference_types) -> None:
        self.server, self.types = server, reference_types
        self.sent: list[list[dict]] = []

    def __call__(self, messages):
        self.sent.append(messages)
        request = urllib.request.Request(
            f"{self.server.url}/chat/completions",
            # With a JSON schema the test server answers bare JSON: the reference reads nothing
            # else, and would ask again for ever (the product's parser is more lenient).
            data=json.dumps({"model": "grader", "messages": messages, "response_format": SCHEMA}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            text = json.load(reply)["choices"][0]["message"]["content"]
        return self.types.SamplerResponse(
            response_text=text, actual_queried_message_list=messages, response_metadata={}
        )

    def prompts(self) -> list[str]:
        assert all(len(messages) == 1 and messages[0]["role"] == "user" for messages in self.sent)
        return sorted({messages[0]["content"] for messages in self.sent})


def grade(*args: str) -> Run:
    if not Endpoint.objects.filter(name="test-grader").exists():
        raise AssertionError("make the grader endpoint first")
    call_command(
        "grade", *args, "--grader", "test-grader", "--template", "simple-evals", "--wait", stdout=io.StringIO()
    )
    return Run.objects.get(name=args[1])


def product_prompts(server) -> list[str]:
    """The distinct grader prompts the product sent (identical requests are asked once)."""
    return sorted({body["messages"][-1]["content"] for _, body in server.requests if body.get("model") == "grader"})


@pytest.fixture
def reference(llm_server):
    call_command("grader_template", "import", "--simple-evals", str(simple_evals_dir()), stdout=io.StringIO())
    endpoint_on(llm_server, "test-grader")
    modules = reference_modules()
    return modules, ReferenceSampler(llm_server, modules["types"])


def reference_grades(modules, sampler, run: Run, *, system: list[dict]) -> None:
    """The reference's HealthBenchEval.grade_sample on every response of `run`, with the
    criteria the run graded it on."""
    healthbench = modules["healthbench_eval"]
    evaluation = types.SimpleNamespace(grader_model=sampler)
    for response in Response.objects.filter(grades__run=run).distinct().order_by("id"):
        grades = Grade.objects.filter(run=run, response=response).order_by("position")
        rubric = [healthbench.RubricItem(g.criterion_text, g.points, g.tags) for g in grades]
        messages = [{"role": m["role"], "content": m["content"]} for m in response.conversation.messages]
        healthbench.HealthBenchEval.grade_sample(
            evaluation, prompt=system + messages, response_text=response.text, example_tags=[], rubric_items=rubric
        )


@pytest.mark.parametrize(("api_style", "role"), [("chat", "system"), ("responses", "developer")])
def test_a_sampled_run_sends_the_references_prompts(llm_server, reference, api_style, role):
    modules, sampler = reference
    subset_of("mine", [conversation_with_rubric(i, n_criteria=3) for i in range(2)])
    endpoint_on(llm_server, "policy", model="policy-1", system_message=SYSTEM, api_style=api_style)
    run = grade("--name", "sampled", "--policy", "policy", "--samples", "2", "--subset", "mine")
    assert run.status == Run.Status.DONE, run.error
    sent = product_prompts(llm_server)
    assert len(sent) == 6  # the test server samples each conversation the same way twice
    # simple-evals grades the messages its sampler actually sent: the system message first
    # (a developer message on the Responses API).
    reference_grades(modules, sampler, run, system=[{"role": role, "content": SYSTEM}])
    assert sent == sampler.prompts()
    assert f"{role}: {SYSTEM}\n\nuser: I have had a mild fever" in sent[0]
    grader = run_report(run=run).data["grader"]
    assert grader["prompt"] == "reference"
    assert grader["prompt_label"] == "reference grader prompt"
    # Its results file holds the prompt as sent, as the reference's does.
    for example in run_export(run=run).document["metadata"]["example_level_metadata"]:
        assert example["prompt"][0] == {"role": role, "content": SYSTEM}


def test_a_run_on_existing_responses_sends_the_references_prompts(llm_server, reference):
    # The reference's physician-completions mode: the conversation as the dataset has it.
    modules, sampler = reference
    imported_run(name="imported", conversations=2, samples=1, n_criteria=3)
    run = grade("--name", "regraded", "--responses-from", "imported")
    assert run.status == Run.Status.DONE, run.error
    reference_grades(modules, sampler, run, system=[])
    assert product_prompts(llm_server) == sampler.prompts()
    assert len(sampler.prompts()) == 6
    assert run_report(run=run).data["grader"]["prompt"] == "reference"
    # Graded per response, the same template is not what the reference sends, and the report says so.
    per_response = grade("--name", "per-response", "--responses-from", "imported", "--grading-mode", "per-response")
    grader = run_report(run=per_response).data["grader"]
    assert grader["prompt"] == "custom"
    assert (
        grader["prompt_label"]
        == "custom grader prompt (graded per response: all of a response's criteria in one prompt)"
    )


def test_a_run_of_the_labelled_items_sends_the_meta_evals_prompts(llm_server, reference):
    modules, sampler = reference
    rows = [
        meta_row("p-1", "c-1", CATEGORY),
        meta_row("p-1", "c-1", OTHER_CATEGORY, labels=(False, True), physicians=(1, 2)),
        meta_row("p-2", "c-3", OTHER_CATEGORY, prompt=[{"content": "Is a fever of 39 C serious?", "role": "user"}]),
    ]
    meta_eval_import(lines=lines(*rows))
    run = grade("--name", "labelled", "--labelled")
    assert run.status == Run.Status.DONE, run.error
    meta = modules["healthbench_meta_eval"]
    evaluation = object.__new__(meta.HealthBenchMetaEval)
    evaluation.examples, evaluation.grader_model, evaluation.n_threads = rows, sampler, 1
    # Its summary wants a macro F1, undefined on three items; its grader calls are made by then.
    with pytest.raises(KeyError, match="pairwise_model_f1_balanced"):
        evaluation(sampler)
    assert len(sampler.sent) == 3
    assert product_prompts(llm_server) == sampler.prompts()
    # The bare rubric text, where a score run writes "[5] criterion".
    assert "[5]" not in sampler.prompts()[0]
    assert run_report(run=run).data["grader"]["prompt"] == "reference"
    # The agreement report names the grader and its prompt too: JSON, CSV and page.
    document = run_meta_eval_report(run=run)
    assert document["grader"]["prompt_label"] == "reference grader prompt"
    assert document["grader"]["model"] == "grader"
    assert "overall,grader_prompt,,reference grader prompt" in report_csv(document)
    client = Client()
    client.force_login(person("reader", Physician.Role.RESEARCHER))
    page = client.get(reverse("metaeval_report"), {"run": str(run.code)}).content.decode()
    assert "reference grader prompt" in page
    Run.objects.filter(id=run.id).update(prompt_filling=Run.PromptFilling.EARLIER)
    run.refresh_from_db()
    assert run_meta_eval_report(run=run)["grader"]["prompt_label"] == (
        "custom grader prompt (rubric items sent as [points] text; the meta-eval sends the bare rubric text)"
    )


def test_a_run_filled_the_earlier_way_says_how_its_prompt_differs(llm_server, reference):
    subset_of("mine", [conversation_with_rubric(0, n_criteria=1)])
    endpoint_on(llm_server, "policy", model="policy-1", system_message=SYSTEM)
    run = grade("--name", "sampled", "--policy", "policy", "--subset", "mine")
    Run.objects.filter(id=run.id).update(prompt_filling=Run.PromptFilling.EARLIER)
    run.refresh_from_db()
    grader = run_report(run=run).data["grader"]
    assert grader["prompt"] == "custom"
    assert grader["prompt_label"] == "custom grader prompt (the policy's system message left out of the conversation)"
