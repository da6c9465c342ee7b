"""The test server's HTTP side: routes, the key check, chat completions, the Responses API,
the Batch API's files and batches, streamed hostile bodies; each request answered by its
``LLMServer`` (tests/llm_server.py), keep-alive as real endpoints do."""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING

from tests.llm_hostile import Streamed
from tests.llm_shapes import api_error

if TYPE_CHECKING:
    from tests.llm_server import LLMServer


class Handler(BaseHTTPRequestHandler):
    owner: LLMServer
    # Keep-alive, as real endpoints do: a client reuses its connections.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm on, the second waits
    # for the client's delayed ACK (40 ms), which would look like latency.
    disable_nagle_algorithm = True

    def log_message(self, format, *args) -> None:  # `format`: the base class's name
        pass

    def _authorization(self) -> str:
        """The credential sent: a bearer token, or Azure OpenAI's api-key header, as a bearer."""
        key = self.headers.get("api-key")
        return f"Bearer {key}" if key else self.headers.get("Authorization", "")

    def _route(self) -> tuple[str, str | None]:
        """(the path as the OpenAI API names it, the model an Azure deployment URL names),
        recording what was received. Azure OpenAI's classic paths
        (/openai/deployments/{deployment}/chat/completions?api-version=..., /openai/files,
        /openai/batches) and its v1 paths (/openai/v1/...) map onto /v1/..."""
        raw_path, _, query = self.path.partition("?")
        params = dict(urllib.parse.parse_qsl(query))
        path = raw_path.rstrip("/")
        with self.owner.lock:
            self.owner.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        deployment = re.match(r"^/openai/deployments/([^/]+)(/.*)$", path)
        if deployment and "api-version" in params:
            return "/v1" + deployment[2], urllib.parse.unquote(deployment[1])
        if path.startswith("/openai/v1/"):
            return "/v1/" + path.removeprefix("/openai/v1/"), None
        if path.startswith("/openai/") and "api-version" in params:
            return "/v1/" + path.removeprefix("/openai/"), None
        return path, None

    def _refused_key(self) -> bool:
        """The files and batches routes check the key as the others do."""
        owner, authorization = self.owner, self._authorization()
        if owner.api_key is None or authorization == f"Bearer {owner.api_key}":
            return False
        self._send(*api_error(401, "Incorrect API key provided.", code="invalid_api_key"))
        return True

    def do_GET(self) -> None:
        path, _ = self._route()
        query = self.path.partition("?")[2]
        if self._refused_key():
            return None
        desk = self.owner.batches
        parts = path.split("/")
        if path.startswith("/v1/files/") and path.endswith("/content") and len(parts) == 5:
            return self._send(*desk.content(parts[3]))
        if path.startswith("/v1/files/") and len(parts) == 4:
            return self._send(*desk.file(parts[3]))
        if path == "/v1/batches":
            return self._send(*desk.listing(dict(urllib.parse.parse_qsl(query))))
        if path.startswith("/v1/batches/") and len(parts) == 4:
            return self._send(*desk.retrieve(parts[3]))
        return self._send(404, {}, self.owner.no_route(self.path))

    def _batch_routes(self, path: str, raw: bytes) -> bool:
        desk = self.owner.batches
        parts = path.split("/")
        if path == "/v1/files":
            if not self._refused_key():
                self._send(*desk.upload(self.headers.get("Content-Type", ""), raw))
            return True
        if path == "/v1/batches" or (path.startswith("/v1/batches/") and path.endswith("/cancel") and len(parts) == 5):
            if self._refused_key():
                return True
            if path.endswith("/cancel"):
                self._send(*desk.cancel_batch(parts[3]))
                return True
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(*api_error(400, "We could not parse the JSON body of your request."))
                return True
            self._send(*desk.create(body, self._authorization(), azure=self.path.startswith("/openai/")))
            return True
        return False

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        path, deployment = self._route()
        batches = self.owner.redirect_to is None and self.owner.dialect != "ollama"  # Ollama has no Batch API
        if batches and self._batch_routes(path, raw):
            return None
        if self.owner.redirect_to is not None:
            with self.owner.lock:
                self.owner.calls += 1
            target = self.owner.redirect_to.rstrip("/") + path.removeprefix("/v1")
            return self._send(307, {"Location": target}, {"error": {"message": f"moved to {target}"}})
        if path not in ("/v1/chat/completions", "/v1/responses"):
            return self._send(404, {}, self.owner.no_route(self.path))
        try:
            body = json.loads(raw)
        except ValueError:
            return self._send(400, {}, {"error": {"message": "body is not JSON"}})
        if deployment is not None:
            body["model"] = deployment  # Azure answers with the deployment's model
        refusal = self.owner.check_request(path, body, self._authorization())
        if refusal is not None:
            status, headers, payload = refusal
            return self._send(*_headed(self.owner.error_reply(status, payload, path, str(body.get("model"))), headers))
        with self.owner.lock:
            self.owner.in_flight += 1
            self.owner.max_in_flight = max(self.owner.max_in_flight, self.owner.in_flight)
        try:
            status, headers, answer = self.owner.answer(body, path)
        finally:
            with self.owner.lock:
                self.owner.in_flight -= 1
        if isinstance(answer, Streamed):
            return self._stream(answer)
        payload = answer
        if status == 0:
            self.close_connection = True
            self.connection.close()
            return
        if status >= 400:
            return self._send(*_headed(self.owner.error_reply(status, payload, path, str(body.get("model"))), headers))
        self._send(status, headers, payload)

    def _stream(self, reply: Streamed) -> None:
        self.close_connection = True
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            for piece in reply.pieces:
                self.wfile.write(piece)
                self.wfile.flush()
                if reply.pause:
                    time.sleep(reply.pause)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what these replies are for

    def _send(self, status: int, headers: dict, payload: object) -> None:
        if isinstance(payload, bytes):
            data, kind = payload, "application/octet-stream"
        elif isinstance(payload, str):  # a server that answers errors in plain text (Ollama's 404)
            data, kind = payload.encode(), "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(payload).encode(), "application/json"
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (a timeout test): nothing to answer to.
            self.close_connection = True


def _headed(reply: tuple[int, object], headers: dict) -> tuple[int, dict, object]:
    return reply[0], headers, reply[1]
