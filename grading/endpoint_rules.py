"""Which API key variables and base URLs an endpoint may use (settings: ENDPOINT_*).

Checked three times: when a curator saves an endpoint, when a run is launched, and by the
worker before it reads a key or opens a connection, so an endpoint saved under an older
policy, or one edited in the database, cannot send a key somewhere the policy forbids.

The URL rule resolves the host and looks at every address it resolves to, so a public name
that points at a metadata or private address is refused too. (A name that changes its
answer between this check and the connection is not caught; the allowlist of hosts is the
defence for deployments that need one.)

Every check reads the host the same way (:func:`url_host`), the way the resolver a worker
connects through does: a host written as a number in any of the forms ``inet_aton``
accepts (``2852039166``, ``0xa9fea9fe``, ``0251.0376.0251.0376``, ``169.254.43518``) is
that IPv4 address, with or without a lookup. An IPv6 address that carries an IPv4 address
(IPv4-mapped ``::ffff:0:0/96``, IPv4-compatible ``::/96``, 6to4 ``2002::/16``, NAT64
``64:ff9b::/96`` and ``64:ff9b:1::/48``, Teredo's client) is judged by the IPv4 address as
well as by itself. Loopback (``127.0.0.0/8``, ``::1``) is private: allowed only with
ENDPOINT_ALLOW_PRIVATE_NETWORKS.
"""

from __future__ import annotations

import ipaddress
import re
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
    "grader_base_url",
    "grader_api_key_env",
    "grader_model",
    "policy_base_url",
    "policy_api_key_env",
    "policy_model",
    "base_url",
    "api_key_env",
    "key_variable",
)
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


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NUMBER_PART = re.compile(r"^(?:0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)$")
# Characters a host name may hold once lower-cased (IDNA names come as xn--...).
_HOST_NAME = re.compile(r"^[a-z0-9_.-]+$")
NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# 0.0.0.0/8 "this network": a connection to 0.0.0.0 reaches the machine itself.
THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a resolver reads in `host`, numbers in decimal, octal (leading 0) or
    hexadecimal (0x), in one to four parts (the last part fills the remaining bytes), else None."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUMBER_PART.match(part) for part in parts):
        return None
    values = [
        int(part, 16) if part[:2].lower() == "0x" else int(part, 8 if part != "0" and part[0] == "0" else 10)
        for part in (p if p not in ("0x", "0X") else "0x0" for p in parts)
    ]
    *leading, last = values
    if any(value > 255 for value in leading) or last >= 256 ** (5 - len(parts)):
        return None
    number = 0
    for value in leading:
        number = number * 256 + value
    return ipaddress.IPv4Address(number * 256 ** (5 - len(parts)) + last)


def url_host(url: str) -> tuple[str, IPAddress | None]:
    """(host as written, lower-cased and without a trailing dot; its address when it is one)."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    try:
        return host, ipaddress.ip_address(host)
    except ValueError:
        return host, _inet_aton(host)


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, by its prefix, or None."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in network for network in NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in IPV4_COMPATIBLE and int(address) > 1:  # :: and ::1 are themselves
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _address_problem(address: IPAddress) -> str | None:
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        if embedded is not None:
            problem = _address_problem(embedded)
            return f"{problem}, inside the IPv6 address" if problem else None
    if address.is_link_local or address in METADATA_ADDRESSES:
        return "a link-local or cloud metadata address"
    if address.is_unspecified or address.is_multicast or address in THIS_NETWORK:
        return "not a unicast address"
    # Loopback before the reserved ranges: ::1 lies in ::/8, which Python counts as reserved.
    if address.is_loopback or address.is_private:
        if settings.ENDPOINT_ALLOW_PRIVATE_NETWORKS:
            return None
        return "a loopback or private-network address (allowed only with ENDPOINT_ALLOW_PRIVATE_NETWORKS=1)"
    if address.is_reserved:
        return "not a unicast address"
    return None


def base_url_problem(url: str, *, resolve: bool = True, unresolved_ok: bool = False) -> str | None:
    """None when calls may go to `url` (empty: OpenAI's default), else why not.

    With `resolve`, a host name is looked up and each of its addresses checked; a name that
    does not resolve is reported as such (the run would fail on it anyway), unless
    `unresolved_ok` (saving an endpoint on a web server that cannot see the workers' DNS).
    A host that is an address, in any notation, is checked without a lookup either way."""
    if not url:
        url = "https://api.openai.com/v1"
    if any(c.isspace() or c == "\\" or ord(c) < 32 for c in url):
        return f"the base URL {url!r} holds a space, a backslash or a control character"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"the base URL {url!r} must start with http:// or https://"
    if parts.username or parts.password or "@" in parts.netloc:
        return "the base URL may not carry a user name or password; use the key variable"
    try:
        host, address = url_host(url)
    except ValueError:
        return f"the base URL {url!r} has a malformed host"
    if not host:
        return f"the base URL {url!r} names no host"
    if address is None and not _HOST_NAME.match(host):
        return f"the base URL's host {host!r} is neither a host name nor an IP address"
    if host in METADATA_HOSTS:
        return f"the base URL's host {host} is a cloud metadata service"
    if not _host_allowed(host if address is None or isinstance(address, ipaddress.IPv6Address) else str(address)):
        return f"the host {host} is not on ENDPOINT_ALLOWED_HOSTS ({', '.join(settings.ENDPOINT_ALLOWED_HOSTS)})"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return f"the base URL {url!r} has a bad port"
    if address is not None:
        addresses = [address]
    elif not resolve:
        return None
    else:
        try:
            infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError) as exc:
            return None if unresolved_ok else f"could not resolve host {host}: {exc}"
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    for found in addresses:
        problem = _address_problem(found)
        if problem:
            return f"the base URL's host {host} is {problem}" + (f" ({found})" if str(found) != host else "")
    return None


def endpoint_problems(*, base_url: str, key_variable: str, resolve: bool = True) -> list[str]:
    return [p for p in (base_url_problem(base_url, resolve=resolve), key_variable_problem(key_variable)) if p]


# Providers with a Batch API our runs can use (/files and /batches, at a discount): OpenAI, and
# Azure OpenAI's global-batch deployments. Gateways and local servers have none we know of.
BATCH_API_HOSTS = re.compile(r"^(?:api\.openai\.com|[\w-]+\.openai\.azure\.com|[\w-]+\.cognitiveservices\.azure\.com)$")


def has_batch_api(base_url: str) -> bool:
    """Whether the endpoint at `base_url` (empty: OpenAI) is a provider with a Batch API."""
    if not base_url:
        return True
    host = (urlsplit(base_url).hostname or "").lower()
    return bool(BATCH_API_HOSTS.match(host))
