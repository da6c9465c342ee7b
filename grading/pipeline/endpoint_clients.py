"""The clients that reach an endpoint: the live calls' (async, one per event loop and
endpoint, bounded in time and bytes) and the Batch API's (the openai package's, sync). Both
reach it the same way: Azure OpenAI's classic paths and api-version, the header that carries
the key, a gateway's extra headers and query parameters (grading.endpoint_access, read
through CallTarget).

A live call is the worker's hot path: hundreds a second per process. The openai client
builds each request anew (its options model, headers, URL, an idempotency key) and sends it
through httpx's client (auth, redirects, cookies, a log line per request): about half a
grade's CPU time. So ``LiveClient`` lets the openai client build the first request of each
path (URL, auth and every header, as the SDK makes them for this endpoint kind) and keeps
it; each call then sends that request with its own JSON body straight to the bounded
transport (the whole-call deadline and the reply's byte cap, grading/pipeline/bounded_transport.py),
reads the reply once, and raises the SDK's own exceptions for a status error, a timeout or
a failed connection, so that callers read every failure as before."""

from __future__ import annotations

import asyncio
import json
import ssl
import weakref
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from django.conf import settings
from openai._models import FinalRequestOptions
from openai._vendor.httpx_aiohttp.transport import AiohttpTransport

from grading.pipeline.bounded_transport import BoundedTransport
from grading.pipeline.endpoint import CallTarget

# Clients belong to the event loop their connections were made on.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, LiveClient]] = weakref.WeakKeyDictionary()
_ssl_context: ssl.SSLContext | None = None


def _tls() -> ssl.SSLContext:
    """One TLS context per process (loading the trust store costs milliseconds), shared by
    the live clients of every endpoint."""
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = httpx2.create_ssl_context()
    return _ssl_context


@dataclass(frozen=True)
class Sent:
    """A live call's reply: its body as received (after inflation) and its headers."""

    content: bytes
    headers: httpx2.Headers


class LiveClient:
    """The live calls to one endpoint on one event loop (see the module's docstring)."""

    def __init__(self, sdk: openai.AsyncOpenAI, transport: BoundedTransport, timeout: float):
        self.sdk = sdk
        self.transport = transport
        self.extensions = {"timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}}
        # (path, model) -> the URL and headers the openai client made for it
        self.made: dict[tuple[str, str], tuple[httpx2.URL, list[tuple[bytes, bytes]]]] = {}

    async def _made_for(self, path: str, body: dict) -> tuple[httpx2.URL, list[tuple[bytes, bytes]]]:
        # By model too: Azure's classic URLs name the deployment, which the body's model gives.
        key = (path, str(body.get("model")))
        made = self.made.get(key)
        if made is None:
            sdk = self.sdk
            options = await sdk._prepare_options(FinalRequestOptions.construct(method="post", url=path, json_data=body))
            request = sdk._build_request(options)
            await sdk._prepare_request(request)
            # The body's length is each call's own; the rest is the endpoint's.
            headers = [(name, value) for name, value in request.headers.raw if name.lower() != b"content-length"]
            made = self.made[key] = (request.url, headers)
        return made

    async def post(self, path: str, body: dict) -> Sent:
        """POST `body` as JSON to `path`; the reply of a 2xx status, else the openai
        client's exception for it (APIStatusError by status, APITimeoutError,
        APIConnectionError with the transport's error as its cause)."""
        url, headers = await self._made_for(path, body)
        # As the openai client encodes a body (openai._utils._json.openapi_dumps).
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        request = httpx2.Request("POST", url, headers=headers, content=content, extensions=self.extensions)
        try:
            response = await self.transport.handle_async_request(request)
            try:
                data = await response.aread()
            except BaseException:
                await response.aclose()
                raise
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except (httpx2.RequestError, ssl.SSLError) as exc:
            raise openai.APIConnectionError(request=request) from exc
        if not response.is_success:
            raise self.sdk._make_status_error_from_response(response)
        return Sent(data, response.headers)

    async def close(self) -> None:
        await self.transport.aclose()
        await self.sdk.close()


class _NoBearer:
    """Sends no Authorization header: the key goes in a header of the gateway's choosing,
    with the endpoint's other headers (CallTarget.headers)."""

    @property
    def auth_headers(self) -> dict[str, str]:
        return {}

    def _auth_headers(self, security: Any) -> dict[str, str]:
        return {}

    def _validate_headers(self, headers: Any, custom_headers: Any) -> None:
        return None


class _AsyncNoBearer(_NoBearer, openai.AsyncOpenAI):
    pass


class _SyncNoBearer(_NoBearer, openai.OpenAI):
    pass


def _options(target: CallTarget) -> dict[str, Any]:
    """What every client of `target` is made with, whatever its kind."""
    return {"default_headers": target.headers() or None, "default_query": target.query() or None}


def _own_header(target: CallTarget) -> bool:
    return target.key_header.lower() not in ("", "authorization")


def _azure_credentials(target: CallTarget) -> tuple[str | None, str | None]:
    """(api_key, azure_ad_token): the key in Azure's api-key header, or, with the key header
    "Authorization", the variable's value as a bearer token (an Entra ID token)."""
    if target.key_header.lower() == "authorization":
        return None, target.api_key()
    return target.api_key(), None


def client_for(endpoint: CallTarget) -> LiveClient:
    """The endpoint's client on this event loop. It lives as long as the loop, so
    connections are reused across the batches a worker grades. The key is read (and its
    variable checked against the allowlist) when the client is made."""
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    key = (
        endpoint.base_url,
        endpoint.api_key_env,
        endpoint.timeout,
        endpoint.provider,
        endpoint.api_version,
        endpoint.key_header,
        endpoint.extra_headers,
        endpoint.extra_query,
    )
    if key not in clients:
        clients[key] = _live_client(endpoint)
    return clients[key]


def _live_client(endpoint: CallTarget) -> LiveClient:
    # The openai package's aiohttp transport (the "aiohttp" extra): it spends about a third
    # less CPU per call than the default httpx one, whose connection pool also looks through
    # every connection for each request. Bounded: the whole call within the endpoint's
    # timeout, and the reply within GRADING_REPLY_MAX_BYTES after inflation. Calls go to it
    # directly, never through an httpx client, so a redirect is never followed: it would
    # re-send the whole prompt (and, to the same origin, the key) to an address nobody checked.
    transport = BoundedTransport(
        AiohttpTransport(verify=_tls(), limits=httpx2.Limits(max_connections=2000, max_keepalive_connections=2000)),
        seconds=endpoint.timeout,
        max_bytes=settings.GRADING_REPLY_MAX_BYTES,
    )
    return LiveClient(_sdk_client(endpoint), transport, endpoint.timeout)


def _sdk_client(endpoint: CallTarget) -> openai.AsyncOpenAI:
    """The openai client of a live endpoint: it builds each path's request once, and makes
    the exceptions of failed calls. It never sends (LiveClient does)."""
    http_client = openai.DefaultAsyncHttpxClient(timeout=endpoint.timeout, follow_redirects=False, verify=_tls())
    options = _options(endpoint) | {"timeout": endpoint.timeout, "max_retries": 0, "http_client": http_client}
    if endpoint.azure_classic:
        # Azure OpenAI's deployment URLs: /openai/deployments/{model}/... ?api-version=...
        api_key, token = _azure_credentials(endpoint)
        return openai.AsyncAzureOpenAI(
            azure_endpoint=endpoint.base_url,
            api_version=endpoint.api_version,
            api_key=api_key,
            azure_ad_token=token,
            **options,
        )
    if _own_header(endpoint):
        return _AsyncNoBearer(base_url=endpoint.base_url or None, api_key="unused", **options)
    return openai.AsyncOpenAI(base_url=endpoint.base_url or None, api_key=endpoint.api_key(), **options)


async def close_clients() -> None:
    """Close this event loop's clients (a loop that ends, as in tests)."""
    for client in _clients.pop(asyncio.get_running_loop(), {}).values():
        await client.close()


def batch_client(target: CallTarget) -> openai.OpenAI:
    """A synchronous client for the Batch API calls (a handful per poll, from the task's own
    thread). The client's own retries take care of a passing fault; redirects are never
    followed, as with the live calls."""
    timeout = max(target.timeout, 60.0)
    http_client = openai.DefaultHttpxClient(timeout=timeout, follow_redirects=False)
    options = _options(target) | {"timeout": timeout, "max_retries": 3, "http_client": http_client}
    if target.azure_classic:
        api_key, token = _azure_credentials(target)
        return openai.AzureOpenAI(
            azure_endpoint=target.base_url,
            api_version=target.api_version,
            api_key=api_key,
            azure_ad_token=token,
            **options,
        )
    if _own_header(target):
        return _SyncNoBearer(base_url=target.base_url or None, api_key="unused", **options)
    return openai.OpenAI(base_url=target.base_url or None, api_key=target.api_key(), **options)
