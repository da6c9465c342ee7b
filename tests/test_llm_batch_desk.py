"""The test server's Files and Batch API, through the openai client and over plain HTTP,
against the schemas written from the OpenAI specification (tests/openai_schemas.py): files,
batches through their states, listed and cancelled, the lines of their output and error files,
an expiry, a failed validation, and the errors."""

import json
import time
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest

from tests.openai_schemas import (
    BATCH,
    BATCH_LIST,
    BATCH_REQUEST_OUTPUT,
    ERROR_RESPONSE,
    OPENAI_FILE,
)
from tests.test_llm_server_replies import valid

pytest_plugins = ["tests.llm_server"]


@pytest.fixture
def server(llm_server):
    llm_server.batches.validating_seconds = 0.02
    llm_server.batches.finalizing_seconds = 0.02
    return llm_server


def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)


def get(server, path: str) -> tuple[int, Any]:
    """(status, the JSON body read, or the raw bytes of a file's content)."""
    try:
        with urllib.request.urlopen(server.url + path, timeout=5) as reply:
            data = reply.read()
            return reply.status, json.loads(data) if reply.headers["Content-Type"] == "application/json" else data
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def lines(*prompts: str, url: str = "/v1/chat/completions") -> bytes:
    rows = [
        {
            "custom_id": f"r{n}",
            "method": "POST",
            "url": url,
            "body": {"model": "grader", "messages": [{"role": "user", "content": prompt}], "max_tokens": 200},
        }
        for n, prompt in enumerate(prompts)
    ]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


PROMPTS = ("user: hi\n\nassistant: eat a kiwi\n\n[5] Mentions need:kiwi", "[3] Mentions need:mango fault:500:1")


def until_ended(server, batch_id: str) -> dict:
    deadline = time.monotonic() + 10
    while True:
        status, batch = get(server, f"/batches/{batch_id}")
        assert status == 200
        valid(BATCH, batch)
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return batch
        assert time.monotonic() < deadline, batch
        time.sleep(0.02)


def test_a_batch_moves_through_its_states_and_answers_each_line_as_the_live_server(server):
    api = client(server)
    uploaded = api.files.create(file=("requests.jsonl", lines(*PROMPTS), "application/jsonl"), purpose="batch")
    _, file = get(server, f"/files/{uploaded.id}")
    valid(OPENAI_FILE, file)
    assert file["purpose"] == "batch"
    created = api.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h", metadata={"run": "x"}
    )
    assert created.status == "validating"
    batch = until_ended(server, created.id)
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 2, "completed": 1, "failed": 1}
    assert batch["in_progress_at"] is not None
    assert batch["completed_at"] is not None
    output = [json.loads(line) for line in api.files.content(batch["output_file_id"]).content.splitlines()]
    errors = [json.loads(line) for line in api.files.content(batch["error_file_id"]).content.splitlines()]
    for line in output + errors:
        valid(BATCH_REQUEST_OUTPUT, line)
    assert output[0]["custom_id"] == "r0"
    assert '"criteria_met": true' in output[0]["response"]["body"]["choices"][0]["message"]["content"]
    assert errors[0]["response"]["status_code"] == 500
    valid(ERROR_RESPONSE, errors[0]["response"]["body"])
    _, listing = get(server, "/batches?limit=1")
    valid(BATCH_LIST, listing)
    assert listing["data"][0]["id"] == created.id


def test_an_expired_batch_and_a_cancelled_one_say_so(server):
    api = client(server)
    uploaded = api.files.create(
        file=("r.jsonl", lines(PROMPTS[0], PROMPTS[0] + " again"), "application/jsonl"), purpose="batch"
    )
    server.batches.expire_after = 1
    expired = until_ended(
        server,
        api.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h").id,
    )
    assert expired["status"] == "expired"
    line = json.loads(api.files.content(expired["error_file_id"]).content.splitlines()[0])
    valid(BATCH_REQUEST_OUTPUT, line)
    assert line["error"]["code"] == "batch_expired"

    server.batches.paused.set()
    held = api.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert api.batches.cancel(held.id).status == "cancelling"
    assert until_ended(server, held.id)["status"] == "cancelled"
    with pytest.raises(openai.ConflictError):
        api.batches.cancel(held.id)


def test_a_file_that_breaks_the_contract_fails_validation_naming_the_line(server):
    api = client(server)
    bad = lines(*PROMPTS).replace(b'"r1"', b'"r0"')
    uploaded = api.files.create(file=("r.jsonl", bad, "application/jsonl"), purpose="batch")
    batch = until_ended(
        server,
        api.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h").id,
    )
    assert batch["status"] == "failed"
    assert batch["errors"]["data"][0]["code"] == "duplicate_custom_id"
    assert batch["errors"]["data"][0]["line"] == 2


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (
            {"input_file_id": "file-x", "endpoint": "/v1/chat/completions", "completion_window": "1h"},
            "completion_window",
        ),
        ({"input_file_id": "file-x", "endpoint": "/v1/chat/completions"}, "completion_window"),
        (
            {"input_file_id": "file-missing", "endpoint": "/v1/chat/completions", "completion_window": "24h"},
            "input_file_id",
        ),
    ],
)
def test_refused_creates_answer_with_openais_error_body(server, body, param):
    request = urllib.request.Request(
        server.url + "/batches", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    error = json.loads(refused.value.read())
    valid(ERROR_RESPONSE, error)
    assert error["error"]["param"] == param


def test_unknown_files_and_batches_are_404s(server):
    for path in ("/files/file-nope", "/files/file-nope/content", "/batches/batch_nope"):
        status, error = get(server, path)
        assert status == 404
        valid(ERROR_RESPONSE, error)
