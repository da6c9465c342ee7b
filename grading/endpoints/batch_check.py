"""`endpoint check --batch`: the endpoint's Batch API tried with one line, the request a run's
provider batch would hold for the check's question. The line is uploaded, a batch is created
and at once cancelled, so nothing is graded or billed; what the provider refuses is read by
the run's own error reader, as the live check does."""

from __future__ import annotations

import openai

from grading.endpoint_access import AZURE
from grading.endpoints.check import CheckResult, body_text, check_request, check_target, not_callable
from grading.models import Endpoint
from grading.pipeline.endpoint_clients import batch_client
from grading.pipeline.provider_batch_lines import request_line
from grading.pipeline.provider_batches import COMPLETION_WINDOW, batch_endpoint
from grading.pipeline.provider_errors import read_error
from healthbench_web.redact import endpoint_keys, redact

CUSTOM_ID = "healthbench-endpoint-check"
# Not the runs' metadata key: a run looking for a batch it created never takes this one.
METADATA_KEY = "healthbench_endpoint_check"
# Statuses in which a batch can still be cancelled (OpenAI's and Azure's lifecycle).
OPEN = ("validating", "in_progress", "finalizing")


def endpoint_batch_check(*, endpoint: Endpoint, mode: str, template: str) -> CheckResult:
    """Upload one line, create a batch of it and cancel the batch; say which step failed."""
    if endpoint.batch_discount is None:
        return CheckResult(
            False,
            [
                "batch: not tried: this endpoint is saved without a Batch API (no batch discount), so its runs grade "
                "live; a provider with one: give the endpoint its discount (the Endpoints page, or endpoint add "
                "--batch-discount D)"
            ],
        )
    target = check_target(endpoint)
    problem = not_callable(target)
    if problem:
        return CheckResult(False, [f"batch: {problem}"])
    path, body = check_request(target, mode, template)
    line = request_line(CUSTOM_ID, path if target.provider == AZURE else "/v1" + path, body)
    client = batch_client(target)
    step = "uploading the batch file"
    try:
        uploaded = client.files.create(file=(f"{CUSTOM_ID}.jsonl", line, "application/jsonl"), purpose="batch")
        step = "creating the batch"
        created = client.batches.create(
            input_file_id=uploaded.id,
            endpoint=batch_endpoint(target),  # type: ignore[arg-type]
            completion_window=COMPLETION_WINDOW,
            metadata={METADATA_KEY: endpoint.name[:500]},
        )
        step = "cancelling the batch"
        ended = _cancelled(client, created.id, created.status)
    except openai.APIStatusError as exc:
        error = read_error(exc.status_code, exc.body, text=body_text(exc))
        said = redact(error.describe(endpoint.name), endpoint_keys())
        return CheckResult(False, [f"batch: the Batch API refused {step}: {said}"])
    except openai.APIConnectionError as exc:
        words = redact(str(exc.__cause__ or exc), endpoint_keys())
        return CheckResult(False, [f"batch: could not reach the Batch API while {step}: {words}"])
    finally:
        client.close()
    return CheckResult(
        True,
        [
            f"batch: uploaded a one-line file ({uploaded.id}, the check's request as a run's batch holds it), "
            f"created batch {created.id} for {batch_endpoint(target)}, {ended}"
        ],
    )


def _cancelled(client: openai.OpenAI, batch_id: str, status: str) -> str:
    """Cancel the batch; a batch that ended before the cancel arrived (a fast provider) is fine."""
    if status in OPEN:
        try:
            return f"cancelled it ({client.batches.cancel(batch_id).status})"
        except openai.ConflictError:  # it ended between the two calls
            status = client.batches.retrieve(batch_id).status
    return f"which had already ended ({status}) when it was to be cancelled"
