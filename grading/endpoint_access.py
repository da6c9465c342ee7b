"""How a call reaches an endpoint beyond its base URL: the provider kind (Azure OpenAI's classic
deployment URLs and `api-version`), the header that carries the key, and a gateway's extra
headers and query parameters. Plain functions of plain values, checked on save and again by
the worker where the call is made.

Extra headers and query parameters are written one per line, ``Name: value``. A value that is
a secret is never typed: ``env:VARIABLE`` reads it from an environment variable on the
operator's allowlist (ENDPOINT_KEY_VARIABLES), as the key itself is read. A header whose name
says it holds a credential (authorization, api-key, token, secret...) takes only such a value.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qs, urlsplit

OPENAI = "openai"
AZURE = "azure"
ENV_PREFIX = "env:"
MAX_PAIRS = 20
MAX_VALUE = 500
HEADER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
QUERY_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# Headers the HTTP client sets itself, or that would change where or how the request goes.
RESERVED_HEADERS = {
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "accept-encoding",
    "cookie",
    "proxy-authorization",
    "te",
    "upgrade",
}
SECRET_NAME = re.compile(r"auth|key|token|secret|password|signature|cookie|credential", re.IGNORECASE)
# An Azure OpenAI deployment URL as the portal shows it.
AZURE_DEPLOYMENT_URL = re.compile(r"^(?P<resource>https?://[^/]+)/openai/deployments/(?P<deployment>[^/?#]+)")
API_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}(?:-preview)?$")


class AccessError(ValueError):
    """A setting that cannot be used; the message says which and why."""


def parse_pairs(text: str, *, what: str, header: bool) -> dict[str, str]:
    """``Name: value`` lines (blank lines skipped) as a dict, checked; raises AccessError."""
    pairs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not name:
            raise AccessError(f"{what}, line {number}: write it as 'Name: value'")
        check_pair(name, value, header=header, where=f"{what}, line {number}")
        if name.lower() in {n.lower() for n in pairs}:
            raise AccessError(f"{what}, line {number}: {name} is given twice")
        pairs[name] = value
    if len(pairs) > MAX_PAIRS:
        raise AccessError(f"{what}: at most {MAX_PAIRS} are allowed")
    return pairs


def check_pair(name: str, value: str, *, header: bool, where: str) -> None:
    from grading.endpoint_rules import key_variable_problem

    pattern = HEADER_NAME if header else QUERY_NAME
    if not pattern.match(name):
        raise AccessError(f"{where}: {name!r} is not a valid {'header' if header else 'parameter'} name")
    if header and name.lower() in RESERVED_HEADERS:
        raise AccessError(f"{where}: {name} is set by the client itself and cannot be changed")
    if len(value) > MAX_VALUE or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise AccessError(f"{where}: the value of {name} is too long or holds control characters")
    if value.startswith(ENV_PREFIX):
        problem = key_variable_problem(value.removeprefix(ENV_PREFIX))
        if problem:
            raise AccessError(f"{where}: {problem}")
    elif SECRET_NAME.search(name):
        raise AccessError(
            f"{where}: {name} looks like a credential: give it as env:VARIABLE (a variable on "
            "ENDPOINT_KEY_VARIABLES), never typed here"
        )


def pairs_text(pairs: dict[str, str]) -> str:
    return "\n".join(f"{name}: {value}" for name, value in pairs.items())


def resolved(pairs: dict[str, str], *, where: str) -> dict[str, str]:
    """The values to send: env:VARIABLE read now (the worker checks the allowlist again)."""
    from grading.endpoint_rules import key_variable_problem

    out = {}
    for name, value in pairs.items():
        if value.startswith(ENV_PREFIX):
            variable = value.removeprefix(ENV_PREFIX)
            problem = key_variable_problem(variable)
            if problem:
                raise AccessError(f"{where}: {problem}")
            value = os.environ.get(variable, "")
            if not value:
                raise AccessError(f"{where}: the environment variable {variable} (for {name}) is not set")
        out[name] = value
    return out


def azure_url_parts(url: str) -> tuple[str, str, str] | None:
    """(resource URL, deployment, api-version) of an Azure deployment URL as the portal
    shows it (``https://R.openai.azure.com/openai/deployments/D/chat/completions?api-version=V``),
    else None."""
    match = AZURE_DEPLOYMENT_URL.match(url)
    if not match:
        return None
    version = parse_qs(urlsplit(url).query).get("api-version", [""])[0]
    return match["resource"], match["deployment"], version


def azure_problem(base_url: str, api_version: str) -> str | None:
    """What is wrong with an Azure OpenAI endpoint's URL and version, or None (the version's
    own fault first: see azure_version_problem).

    Classic (an ``api-version``): the base URL is the resource, ``https://R.openai.azure.com``.
    The v1 API (no version): the base URL ends in ``/openai/v1``."""
    if not base_url:
        return "Azure OpenAI needs its resource's URL (https://YOUR-RESOURCE.openai.azure.com)"
    parts = urlsplit(base_url)
    if parts.query:
        return "give the api-version in its own field, not in the URL"
    path = parts.path.rstrip("/")
    if api_version:
        if problem := azure_version_problem(api_version):
            return problem
        if path:
            return "with an api-version, the base URL is the resource alone (https://YOUR-RESOURCE.openai.azure.com)"
    elif path != "/openai/v1":
        return "without an api-version, the base URL is the v1 API's (https://YOUR-RESOURCE.openai.azure.com/openai/v1)"
    return None


def azure_version_problem(api_version: str) -> str | None:
    if api_version and not API_VERSION.match(api_version):
        return f"{api_version!r} is not an api-version (YYYY-MM-DD, or YYYY-MM-DD-preview)"
    return None
