"""The presets send what the reference grader sends, field by field, as the test server
receives it; any other setting marks the run "differs from the reference grader" on its
report, its CSV and its results file; the published template's hash is the reference's."""

import hashlib
import json
from collections.abc import Callable

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Physician
from grading.endpoints.presets import PRESETS_BY_SHORT
from grading.models import Endpoint, Grade, Run
from grading.pipeline.batches import batch_run
from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.pipeline.simple_evals_template import read_grader_template
from grading.reference_grader import PUBLISHED_TEMPLATE_SHA256, grader_verdict
from grading.reports.report import report_csv, run_report
from grading.reports.run_export import run_export
from tests.grading_data import imported_run
from tests.people import person
from tests.simple_evals import simple_evals_dir

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]

# What simple-evals sends for one grader prompt P, read from its samplers:
# * Original: ChatCompletionSampler(model="gpt-4.1-2025-04-14", system_message=OPENAI_SYSTEM_MESSAGE_API,
#   max_tokens=2048) calls chat.completions.create(model, messages=[system, user P], temperature=0.5 (the
#   sampler's default), max_tokens=2048).
# * Professional (pull request #108): ResponsesSampler(model="gpt-5.4-2026-03-05", reasoning_model=True,
#   reasoning_effort="low") calls responses.create(model, input=[user P], reasoning={"effort": "low"}), and
#   nothing else: no system message, no max_output_tokens, no temperature, no text.format.
REFERENCE_REQUESTS: dict[str, tuple[str, Callable[[str], dict[str, object]]]] = {
    "original": (
        "/v1/chat/completions",
        lambda prompt: {
            "model": "gpt-4.1-2025-04-14",
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": prompt},
            ],
            "temperature": 0.5,
            "max_tokens": 2048,
        },
    ),
    "professional": (
        "/v1/responses",
        lambda prompt: {
            "model": "gpt-5.4-2026-03-05",
            "input": [{"role": "user", "content": prompt}],
            "reasoning": {"effort": "low"},
        },
    ),
}
# Our one addition on Responses: the provider keeps no copy of a health conversation. It does
# not change what the model is asked or how it answers.
OUR_PRIVACY_FIELDS: dict[str, dict[str, object]] = {"/v1/responses": {"store": False}}


def preset_endpoint(server, short: str, **changes) -> Endpoint:
    initial = PRESETS_BY_SHORT[short].initial
    fields = initial | {"base_url": server.url, "key_variable": "", "timeout_seconds": 5.0} | changes
    return Endpoint.objects.create(**fields)


def graded_run(server, short: str, name: str = "regraded", **changes) -> Run:
    source = imported_run(name=f"source-{name}", conversations=1, samples=1, n_criteria=2)
    grader = preset_endpoint(server, short, name=f"grader-{name}", **changes)
    run = run_launch(spec=RunRequest(name=name, grader=grader, responses_from=source))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    return run


@pytest.mark.parametrize("short", ["original", "professional"])
def test_each_preset_sends_exactly_the_reference_request(llm_server, short):
    # The test server wraps some answers in sentences, which the presets' reading (the
    # reference's) asks again about: read leniently here, where the request is what is checked.
    run = graded_run(llm_server, short, lenient_answers=True)
    assert run.status == Run.Status.DONE, run.error
    calls = list(llm_server.requests)
    assert len(calls) == 2  # one per criterion, as the reference calls
    path, reference = REFERENCE_REQUESTS[short]
    for sent_path, body in calls:
        prompt = (body.get("messages") or body.get("input"))[-1]["content"]
        expected = reference(prompt) | OUR_PRIVACY_FIELDS.get(path, {})
        assert sent_path == path
        # Field by field, so that a failure names the field.
        assert sorted(body) == sorted(expected)
        for field, value in expected.items():
            assert body[field] == value, field
    data = run_report(run=run).data
    assert data["grader"]["reference"] == short
    assert data["grader"]["differences"] == []
    assert data["grader"]["label"].startswith("the reference grader request")


@pytest.mark.parametrize(
    ("short", "changes", "words"),
    [
        ("original", {"temperature": 0.0}, "temperature 0 (the reference: 0.5)"),
        ("original", {"structured_output": True}, "strict JSON schema yes (the reference: no)"),
        ("original", {"system_message": ""}, "system message none"),
        ("professional", {"structured_output": True}, "strict JSON schema yes"),
        ("professional", {"max_output_tokens": 4096}, "output limit 4096 (the reference: none)"),
        ("professional", {"model": "gpt-5.4"}, "model 'gpt-5.4'"),
    ],
)
def test_any_other_setting_marks_the_report_and_its_downloads(llm_server, short, changes, words):
    run = graded_run(llm_server, short, **changes)
    assert run.status == Run.Status.DONE, run.error
    data = run_report(run=run).data
    assert data["grader"]["reference"] is None
    assert data["grader"]["nearest_reference"] == short
    assert data["grader"]["label"].startswith("differs from the reference grader")
    assert words in data["grader"]["label"]
    assert "differs from the reference grader" in report_csv(data)
    exported = run_export(run=run).document
    assert exported["metadata"]["grader"]["differences"] == data["grader"]["differences"]


def test_our_improvements_are_still_sent_when_chosen(llm_server):
    run = graded_run(llm_server, "original", temperature=0.0, structured_output=True)
    body = llm_server.requests[-1][1]
    assert body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"
    assert run.status == Run.Status.DONE


def test_our_prompt_is_a_custom_grader_prompt_and_the_published_hash_is_recognised():
    verdict = grader_verdict(PRESETS_BY_SHORT["original"].reference.settings(), prompt_hash="0" * 64)
    assert verdict.matches
    assert verdict.prompt_label == "custom grader prompt"
    assert hashlib.sha256(DEFAULT_TEMPLATE.encode()).hexdigest() != PUBLISHED_TEMPLATE_SHA256
    same = grader_verdict(PRESETS_BY_SHORT["original"].reference.settings(), prompt_hash=PUBLISHED_TEMPLATE_SHA256)
    assert same.prompt_label == "reference grader prompt"


def test_the_published_hash_is_that_of_the_checkouts_template():
    text, path = read_grader_template(simple_evals_dir())
    assert path.name == "healthbench_eval.py"
    assert hashlib.sha256(text.encode()).hexdigest() == PUBLISHED_TEMPLATE_SHA256


def test_the_report_page_and_run_page_say_how_the_grader_compares(llm_server):
    run = graded_run(llm_server, "original", structured_output=True)
    researcher = Client()
    researcher.force_login(person("reader", Physician.Role.RESEARCHER))
    report = researcher.get(reverse("report_detail", args=[run.code])).content.decode()
    assert "differs from the reference grader" in report
    assert "custom grader prompt" in report
    page = researcher.get(reverse("run_detail", args=[run.code])).content.decode()
    assert "differs from the reference grader" in page
    document = json.loads(researcher.get(reverse("report_json", args=[run.code])).content)
    assert document["grader"]["nearest_reference"] == "original"


def test_the_presets_read_the_answer_as_the_reference_reads_it(llm_server):
    # A grader that answers a criterion with text around the JSON, every time it is asked
    # (fault:chatty): the reference asks again (for ever); a preset asks again too, until its
    # attempts run out, and says so. The other criteria are answered bare or in a json fence.
    assert PRESETS_BY_SHORT["original"].initial["lenient_answers"] is False
    source = imported_run(name="source", conversations=3, samples=1, n_criteria=3, faults={0: "chatty:3"})
    strict = preset_endpoint(llm_server, "original", name="strict")
    run = run_launch(spec=RunRequest(name="strict", grader=strict, responses_from=source))
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    failed = Grade.objects.filter(run=run, status=Grade.Status.FAILED)
    graded = Grade.objects.filter(run=run, status=Grade.Status.GRADED)
    assert failed.exists()
    assert graded.exists()
    assert all("unreadable answer" in error for error in failed.values_list("error", flat=True))
    assert all(
        not raw.startswith("```json") or raw.endswith("```") for raw in graded.values_list("raw_output", flat=True)
    )
    grader = run_report(run=run).data["grader"]
    assert grader["answers"] == "answers read as the reference reads them (one JSON object, else asked again)"
    endpoint = preset_endpoint(llm_server, "original", name="lenient", lenient_answers=True)
    lenient = run_launch(spec=RunRequest(name="lenient", grader=endpoint, responses_from=source))
    for batch_id in lenient.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    assert not Grade.objects.filter(run=lenient, status=Grade.Status.FAILED).exists()
    assert run_report(run=lenient).data["grader"]["answers"].startswith("answers read leniently")
