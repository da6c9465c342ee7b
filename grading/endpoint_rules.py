"""Which API key variables and base URLs an endpoint may use (settings: ENDPOINT_*).

Checked three times: when a curator saves an endpoint, when a run is launched, and by the
worker before it reads a key or opens a connection, so an endpoint saved under an older
policy, or one edited in the database, cannot send a key somewhere the policy forbids.

The URL rule resolves the host and looks at every address it resolves to, so a public name
that points at a metadata or private address is refused too. (A name that changes its
answer between this check and the connection is not caught; the allowlist of hosts is the
defence for deployments that need one.)
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit

from django.conf import settings

from healthbench_web.env import reserved_variables

# Cloud metadata services by name; their addresses (169.254.169.254, fd00:ec2::254) are
# caught by the link-local and private rules.
METADATA_HOSTS = {
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
}
METADATA_ADDRESSES = {ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")}


# Fields of the run form and API before endpoints: a request that still sends one is
# refused whole, never half-read, so nothing a researcher types points a worker at a URL or
# a variable.
RAW_ENDPOINT_FIELDS = (
    "grader_base_url", "grader_api_key_env", "grader_model", "policy_base_url", "policy_api_key_env",
    "policy_model", "base_url", "api_key_env", "key_variable",
)  # fmt: skip
RAW_FIELDS_MESSAGE = (
    "Runs do not take a base URL, model or API key variable: name a grader endpoint (and a policy "
    "endpoint) instead. Curators manage endpoints on the Endpoints page; GET /api/endpoints/ lists them."
)


def raw_endpoint_fields(data: object) -> list[str]:
    """The refused fields a request carries (a body that is not an object carries none)."""
    if not isinstance(data, Mapping):
        return []
    return [name for name in RAW_ENDPOINT_FIELDS if name in data]


def key_variable_problem(name: str) -> str | None:
    """None when a worker may read `name` (empty: no key), else why not."""
    if not name:
        return None
    if name in reserved_variables():
        return (
            f"the key variable {name} is one of this application's own settings and is never sent to a "
            "provider; put the key in a variable of its own"
        )
    allowed = settings.ENDPOINT_KEY_VARIABLES
    if name not in allowed:
        listed = ", ".join(allowed) or "none"
        return (
            f"the key variable {name} is not on the operator's allowlist ENDPOINT_KEY_VARIABLES "
            f"(now: {listed}); ask the operator to add it, or choose a listed one"
        )
    return None


def _host_allowed(host: str) -> bool:
    allowed = settings.ENDPOINT_ALLOWED_HOSTS
    if not allowed:
        return True
    for pattern in allowed:
        pattern = pattern.lower()
        if pattern.startswith("*.") and (host.endswith(pattern[1:]) or host == pattern[2:]):
            return True
        if host == pattern:
            return True
    return False


def _address_problem(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if address.is_link_local or address in METADATA_ADDRESSES:
        return "a link-local or cloud metadata address"
    if address.is_unspecified or address.is_multicast or address.is_reserved:
        return "not a unicast address"
    if (address.is_loopback or address.is_private) and not settings.ENDPOINT_ALLOW_PRIVATE_NETWORKS:
        return "a loopback or private-network address (allowed only with ENDPOINT_ALLOW_PRIVATE_NETWORKS=1)"
    return None


def base_url_problem(url: str, *, resolve: bool = True, unresolved_ok: bool = False) -> str | None:
    """None when calls may go to `url` (empty: OpenAI's default), else why not.

    With `resolve`, a host name is looked up and each of its addresses checked; a name that
    does not resolve is reported as such (the run would fail on it anyway), unless
    `unresolved_ok` (saving an endpoint on a web server that cannot see the workers' DNS)."""
    if not url:
        url = "https://api.openai.com/v1"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"the base URL {url!r} must start with http:// or https://"
    if parts.username or parts.password:
        return "the base URL may not carry a user name or password; use the key variable"
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        return f"the base URL {url!r} names no host"
    if host in METADATA_HOSTS:
        return f"the base URL's host {host} is a cloud metadata service"
    if not _host_allowed(host):
        return f"the host {host} is not on ENDPOINT_ALLOWED_HOSTS ({', '.join(settings.ENDPOINT_ALLOWED_HOSTS)})"
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        if not resolve:
            return None
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return f"the base URL {url!r} has a bad port"
        try:
            infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError) as exc:
            return None if unresolved_ok else f"could not resolve host {host}: {exc}"
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    for address in addresses:
        problem = _address_problem(address)
        if problem:
            return f"the base URL's host {host} is {problem}" + (f" ({address})" if str(address) != host else "")
    return None


def endpoint_problems(*, base_url: str, key_variable: str, resolve: bool = True) -> list[str]:
    return [p for p in (base_url_problem(base_url, resolve=resolve), key_variable_problem(key_variable)) if p]
