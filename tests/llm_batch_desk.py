"""The test LLM server's Files and Batch API (OpenAI's ``/v1/files`` and ``/v1/batches``), as
tests.llm_server serves them: uploads, their content, batches that move through their states
over time and answer each line as the live endpoint would.

* ``POST /v1/files`` (multipart: ``purpose``, ``file``), ``GET /v1/files/{id}`` and
  ``GET /v1/files/{id}/content``. A ``batch`` upload must be a ``.jsonl`` file of at most
  ``max_file_bytes``.
* ``POST /v1/batches`` (``input_file_id``, ``endpoint``, ``completion_window: "24h"``,
  ``metadata``), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, and
  ``GET /v1/batches`` (newest first, ``limit`` and ``after``).
* A batch is ``validating`` for ``validating_seconds``; a file that breaks the contract
  (a line that is not JSON or lacks ``custom_id``/``method``/``url``/``body``, a repeated
  ``custom_id``, a ``url`` other than the batch's endpoint, more than ``max_requests``
  lines, more than one model) makes it ``failed``, with ``errors`` naming the line. Then it
  is ``in_progress`` and answers its lines one by one through the live server's own rules
  (the same verdicts, faults, refusals, cut-offs, usage and prefix cache): a 2xx answer goes
  to the output file, any other to the error file (a dropped connection as a 500). Then
  ``finalizing`` for ``finalizing_seconds`` and ``completed``.
* Controls: ``paused`` holds batches in progress (a test kills a worker meanwhile);
  ``expire_after`` makes the next batch expire once that many lines were answered (the rest
  go to the error file with ``batch_expired``, as OpenAI does); ``fail_validation`` makes the
  next batch fail validation with that message. A cancel moves a batch to ``cancelling``,
  then ``cancelled`` with the lines answered so far in its output file.

Every object keeps the specification's shape (tests/openai_schemas.py: Batch, OpenAIFile,
the request output lines); errors are OpenAI's ``{"error": {...}}`` bodies.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from jsonschema import Draft202012Validator

from tests.llm_shapes import api_error
from tests.openai_schemas import BATCH_REQUEST_INPUT, CREATE_BATCH_REQUEST

FILE_PURPOSES = {"assistants", "batch", "fine-tune", "vision", "user_data", "evals"}
# Of the specification's endpoints, those this server answers.
BATCH_ENDPOINTS = {"/v1/responses", "/v1/chat/completions"}
AZURE_ENDPOINTS = {"/responses", "/chat/completions"}
OPEN = ("validating", "in_progress", "finalizing", "cancelling")


def _id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def not_found(kind: str, ident: str, param: str) -> tuple[int, dict, dict]:
    return api_error(404, f"No such {kind}: '{ident}'", param=param)


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))

    def public(self) -> dict:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "expires_at": None,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
        }


@dataclass
class ServedBatch:
    id: str
    endpoint: str
    input_file_id: str
    metadata: dict | None
    authorization: str
    created_at: int = field(default_factory=lambda: int(time.time()))
    status: str = "validating"
    times: dict = field(default_factory=dict)
    errors: dict | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    model: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    def public(self) -> dict:
        stamp = {
            name: self.times.get(name)
            for name in (
                "in_progress_at",
                "finalizing_at",
                "completed_at",
                "failed_at",
                "expired_at",
                "cancelling_at",
                "cancelled_at",
            )
        }
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "model": self.model,
            "errors": self.errors,
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "expires_at": self.created_at + 24 * 3600,
            **stamp,
            "request_counts": {"total": self.total, "completed": self.completed, "failed": self.failed},
            "metadata": self.metadata,
        }


class BatchDesk:
    """The files and batches of one server. `answer(url, body, authorization)` is the live
    server's (status, headers, body) for one request, without its latency."""

    def __init__(self, answer: Callable[[str, dict, str], tuple[int, dict, dict]]):
        self.answer = answer
        self.lock = threading.Lock()
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, ServedBatch] = {}
        self.validating_seconds = 0.05
        self.finalizing_seconds = 0.05
        self.line_seconds = 0.0
        self.max_requests = 50_000
        self.max_file_bytes = 200 * 1024 * 1024
        self.paused = threading.Event()
        self.expire_after: int | None = None
        self.fail_validation: str | None = None
        self.created = 0  # batches created, for tests that count duplicates
        self.cancels = 0
        # Each answer line, in order, goes through the next of these first (a malformed line).
        self.spoilers: deque[Callable[[dict], dict]] = deque()

    # --- files ----------------------------------------------------------------------------

    def upload(self, content_type: str, raw: bytes) -> tuple[int, dict, dict | bytes]:
        fields = _multipart(content_type, raw)
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if "file" not in fields:
            return api_error(
                400, "Missing required parameter: 'file'.", param="file", code="missing_required_parameter"
            )
        if purpose not in FILE_PURPOSES:
            return api_error(400, f"'{purpose}' is not one of {sorted(FILE_PURPOSES)} - 'purpose'", param="purpose")
        filename, data = fields["file"]
        if purpose == "batch":
            if not (filename or "").endswith(".jsonl"):
                return api_error(400, "Invalid file format for Batch API. Must be .jsonl", param="file")
            if len(data) > self.max_file_bytes:
                return api_error(
                    400, f"File is too large: the Batch API takes at most {self.max_file_bytes} bytes.", param="file"
                )
        stored = StoredFile(_id("file-"), filename or "upload", purpose, data)
        with self.lock:
            self.files[stored.id] = stored
        return 200, {}, stored.public()

    def file(self, file_id: str) -> tuple[int, dict, dict | bytes]:
        stored = self.files.get(file_id)
        return (200, {}, stored.public()) if stored else not_found("File object", file_id, "file_id")

    def content(self, file_id: str) -> tuple[int, dict, dict | bytes]:
        stored = self.files.get(file_id)
        return (200, {}, stored.data) if stored else not_found("File object", file_id, "file_id")

    # --- batches --------------------------------------------------------------------------

    def create(self, body: dict, authorization: str, *, azure: bool = False) -> tuple[int, dict, dict | bytes]:
        # The body as the specification's CreateBatchRequest has it, or OpenAI's 400 naming the field.
        # Azure OpenAI names the endpoint without the version ("/chat/completions").
        checked = body
        if azure and body.get("endpoint") in AZURE_ENDPOINTS:
            checked = {**body, "endpoint": "/v1" + body["endpoint"]}
        for error in sorted(Draft202012Validator(CREATE_BATCH_REQUEST).iter_errors(checked), key=str):
            param = str(error.path[0]) if error.path else error.message.split("'")[1]
            code = "missing_required_parameter" if error.validator == "required" else "invalid_value"
            return api_error(400, f"Invalid value for '{param}': {error.message}", param=param, code=code)
        stored = self.files.get(str(body["input_file_id"]))
        if stored is None:
            return not_found("File object", str(body["input_file_id"]), "input_file_id")
        if stored.purpose != "batch":
            return api_error(400, "The input file must be uploaded with purpose 'batch'.", param="input_file_id")
        batch = ServedBatch(_id("batch_"), body["endpoint"], stored.id, body.get("metadata"), authorization)
        with self.lock:
            self.batches[batch.id] = batch
            self.created += 1
            expire, self.expire_after = self.expire_after, None
            invalid, self.fail_validation = self.fail_validation, None
        threading.Thread(target=self._work, args=(batch, stored.data, expire, invalid), daemon=True).start()
        return 200, {}, batch.public()

    def retrieve(self, batch_id: str) -> tuple[int, dict, dict | bytes]:
        batch = self.batches.get(batch_id)
        return (200, {}, batch.public()) if batch else not_found("batch", batch_id, "batch_id")

    def cancel_batch(self, batch_id: str) -> tuple[int, dict, dict | bytes]:
        batch = self.batches.get(batch_id)
        if batch is None:
            return not_found("batch", batch_id, "batch_id")
        with self.lock:
            if batch.status not in ("validating", "in_progress", "finalizing", "cancelling"):
                return api_error(409, f"Cannot cancel a batch with status '{batch.status}'.")
            self.cancels += 1
            if batch.status != "cancelling":
                batch.status = "cancelling"
                batch.times["cancelling_at"] = int(time.time())
            batch.cancel.set()
        return 200, {}, batch.public()

    def listing(self, query: dict[str, str]) -> tuple[int, dict, dict | bytes]:
        limit = max(1, min(100, int(query.get("limit") or 20)))
        newest = sorted(self.batches.values(), key=lambda b: (b.created_at, b.id), reverse=True)
        if query.get("after"):
            ids = [b.id for b in newest]
            newest = newest[ids.index(query["after"]) + 1 :] if query["after"] in ids else []
        page = newest[:limit]
        return (
            200,
            {},
            {
                "object": "list",
                "data": [b.public() for b in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(newest) > limit,
            },
        )

    # --- the batch's life -----------------------------------------------------------------

    def _settle(self, batch: ServedBatch, status: str, outputs: list[dict], errors: list[dict]) -> None:
        files = {}
        for name, lines in (("output", outputs), ("error", errors)):
            if lines:
                data = "".join(json.dumps(line) + "\n" for line in lines).encode()
                stored = StoredFile(_id("file-"), f"batch_{batch.id}_{name}.jsonl", "batch_output", data)
                files[name] = stored.id
                with self.lock:
                    self.files[stored.id] = stored
        with self.lock:
            batch.output_file_id = files.get("output")
            batch.error_file_id = files.get("error")
            batch.status = status
            batch.times[f"{status}_at"] = int(time.time())

    def _work(self, batch: ServedBatch, data: bytes, expire: int | None, invalid: str | None) -> None:
        time.sleep(self.validating_seconds)
        lines, problems = self._validate(batch, data)
        if invalid:
            problems = [{"code": "invalid_request", "message": invalid, "param": None, "line": None}]
        if problems:
            with self.lock:
                batch.errors = {"object": "list", "data": problems}
                batch.status = "failed"
                batch.times["failed_at"] = int(time.time())
            return
        if batch.cancel.is_set():
            return self._settle(batch, "cancelled", [], [])
        with self.lock:
            batch.total = len(lines)
            batch.status = "in_progress"
            batch.times["in_progress_at"] = int(time.time())
        outputs: list[dict] = []
        errors: list[dict] = []
        for n, line in enumerate(lines):
            while self.paused.is_set() and not batch.cancel.is_set():
                time.sleep(0.02)
            if batch.cancel.is_set():
                return self._settle(batch, "cancelled", outputs, errors)
            if expire is not None and n >= expire:
                for rest in lines[n:]:
                    errors.append(
                        _error_line(
                            rest["custom_id"],
                            "batch_expired",
                            "This request could not be executed before the completion window expired.",
                        )
                    )
                with self.lock:
                    batch.failed += len(lines) - n
                return self._settle(batch, "expired", outputs, errors)
            if self.line_seconds:
                time.sleep(self.line_seconds)
            path = batch.endpoint if batch.endpoint.startswith("/v1/") else "/v1" + batch.endpoint
            status, _headers, body = self.answer(path, line["body"], batch.authorization)
            if status == 0:  # the live server would drop the connection
                status, _headers, body = api_error(500, "The server had an error", kind="server_error")
            reply = {
                "id": _id("batch_req_"),
                "custom_id": line["custom_id"],
                "response": {"status_code": status, "request_id": uuid.uuid4().hex, "body": body},
                "error": None,
            }
            with self.lock:
                if self.spoilers:
                    reply = self.spoilers.popleft()(reply)
                if 200 <= status < 300:
                    outputs.append(reply)
                    batch.completed += 1
                else:
                    errors.append(reply)
                    batch.failed += 1
        with self.lock:
            batch.status = "finalizing"
            batch.times["finalizing_at"] = int(time.time())
        time.sleep(self.finalizing_seconds)
        self._settle(batch, "cancelled" if batch.cancel.is_set() else "completed", outputs, errors)

    def _validate(self, batch: ServedBatch, data: bytes) -> tuple[list[dict], list[dict]]:
        lines: list[dict] = []
        seen: set[str] = set()
        models: set[str] = set()

        def problem(code: str, message: str, line: int | None, param: str | None = None) -> list[dict]:
            return [{"code": code, "message": message, "param": param, "line": line}]

        for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                return [], problem("invalid_json_line", "This line is not parseable as valid JSON.", number)
            missing = [k for k in ("custom_id", "method", "url", "body") if k not in line]
            if not missing and not Draft202012Validator(BATCH_REQUEST_INPUT).is_valid(line):
                return [], problem("invalid_request", "The line is not a batch request input object.", number)
            if missing:
                return [], problem(
                    "missing_required_parameter", f"Missing required parameter: '{missing[0]}'.", number, missing[0]
                )
            if line["method"] != "POST":
                return [], problem("invalid_method", "Only POST is supported.", number, "method")
            if line["url"] != batch.endpoint:
                return [], problem(
                    "mismatched_endpoint",
                    f"The url {line['url']!r} does not match the batch's endpoint {batch.endpoint!r}.",
                    number,
                    "url",
                )
            if line["custom_id"] in seen:
                return [], problem(
                    "duplicate_custom_id", "The custom_id of this line is used by another line.", number, "custom_id"
                )
            seen.add(line["custom_id"])
            models.add(str((line["body"] or {}).get("model")))
            lines.append(line)
        if not lines:
            return [], problem("empty_file", "The input file holds no requests.", None)
        if len(lines) > self.max_requests:
            return [], problem("too_many_requests", f"A batch takes at most {self.max_requests} requests.", None)
        if len(models) > 1:
            return [], problem("mismatched_model", "All the requests of a batch must use the same model.", None)
        batch.model = models.pop()
        return lines, []


def _error_line(custom_id: str, code: str, message: str) -> dict:
    return {
        "id": _id("batch_req_"),
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """{field: (filename, bytes)} of a multipart/form-data body."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    fields: dict[str, tuple[str | None, bytes]] = {}
    if not message.is_multipart():
        return fields
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            payload = part.get_payload(decode=True)
            fields[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields
