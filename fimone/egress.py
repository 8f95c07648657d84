"""Where outbound requests may go (docs/design.md §1.14): the egress guard of HTTP connectors, http hooks
and agents' own model endpoints.

A request whose host resolves to a loopback, link-local (the cloud metadata address
169.254.169.254 included), private (RFC 1918, ``fc00::/7``, CGNAT ``100.64.0.0/10``),
unspecified, multicast or otherwise non-public address is refused with :class:`EgressRefused`
before anything is sent, unless ``settings.EGRESS_ALLOW`` lists the host name, the address or a
network holding it. The check is made on the addresses DNS answered, and the connection is pinned
to an address that passed: the name is not resolved a second time, so a DNS answer that changes
between the check and the connection (rebinding) reaches nothing new. TLS still verifies the
certificate against the host name (SNI).

Use :func:`async_transport` as the ``transport`` of an ``httpx`` (or ``httpx2``) ``AsyncClient``.
The client then ignores proxies named by the environment: a proxy would resolve the name itself.

``EGRESS_ALLOW`` (:func:`parse_allow`): comma-separated host names (exact, case-insensitive), IP
addresses and CIDR networks, or ``*`` for everything. Its default is empty in production and the
loopback networks in development, where the demo's payments service is this same server.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
CGNAT = ipaddress.ip_network("100.64.0.0/10")
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOST_NAME_RE = re.compile(
    r"(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class EgressRefused(Exception):
    """A request refused before anything was sent. ``str()`` is the plain sentence callers show."""

    def __init__(self, host: str, address: IPAddress, kind: str) -> None:
        self.host, self.address, self.kind = host, address, kind
        where = f"{host} is {kind}" if host == str(address) else f"{host} resolves to {kind} ({address})"
        super().__init__(f"refused: {where}; allow it with EGRESS_ALLOW")


@dataclass(frozen=True)
class AllowList:
    """What ``EGRESS_ALLOW`` lets through beside public addresses."""

    everything: bool = False
    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    def allows(self, host: str, address: IPAddress) -> bool:
        if self.everything or _normal_host(host) in self.hosts:
            return True
        return any(address in network for network in self.networks if network.version == address.version)


def parse_allow(items: Iterable[str]) -> AllowList:
    """The allow list of ``items`` (host names, IP addresses, CIDR networks, or ``*``).

    Raises ``ValueError`` naming the first item that is none of these."""
    everything, hosts, networks = False, set(), []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        if item == "*":
            everything = True
            continue
        try:
            networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        name = _normal_host(item)
        if not _HOST_NAME_RE.fullmatch(name) or name.replace(".", "").isdigit():
            raise ValueError(f"{item!r} is neither a host name, an IP address nor a CIDR network")
        hosts.add(name)
    return AllowList(everything=everything, hosts=frozenset(hosts), networks=tuple(networks))


@functools.lru_cache(maxsize=8)
def _allow_list(items: tuple[str, ...]) -> AllowList:
    return parse_allow(items)


def allow_list() -> AllowList:
    """``settings.EGRESS_ALLOW``, parsed (a changed setting is read again)."""
    from django.conf import settings

    value = getattr(settings, "EGRESS_ALLOW", ())
    return _allow_list(tuple([value] if isinstance(value, str) else value))


def refused_kind(address: IPAddress) -> str | None:
    """What makes ``address`` one requests may not reach by default (``"a private address"``, …),
    or ``None`` for a public one. IPv4 addresses carried in IPv6 ones (mapped, NAT64, 6to4) are
    judged as the IPv4 address they carry."""
    inner = _carried_ipv4(address)
    if inner in METADATA_ADDRESSES or address in METADATA_ADDRESSES:
        return "the cloud metadata address"
    if inner.is_unspecified:
        return "an unspecified address"
    if inner.is_loopback:
        return "a loopback address"
    if inner.is_link_local:
        return "a link-local address"
    if inner.is_multicast:
        return "a multicast address"
    if inner.is_private or inner in CGNAT or inner in _SITE_LOCAL:
        return "a private address"
    if not inner.is_global:
        return "a non-public address"
    return None


def check_address(host: str, address: IPAddress, allowed: AllowList | None = None) -> None:
    """Raise :class:`EgressRefused` unless a request for ``host`` may connect to ``address``."""
    allowed = allow_list() if allowed is None else allowed
    kind = refused_kind(address)
    if kind is not None and not allowed.allows(host, address):
        raise EgressRefused(host, address, kind)


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` resolves to, in the resolver's order (an IP address is itself).
    Raises ``OSError`` (``socket.gaierror``) when the name does not resolve."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    answers = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


async def checked_addresses(host: str, port: int) -> list[IPAddress]:
    """Resolve ``host`` and check every address it resolves to (one refused address refuses the
    host: its name is not one to trust)."""
    addresses = await resolve(host, port)
    allowed = allow_list()
    for address in addresses:
        check_address(host, address, allowed)
    return addresses


def url_origin(url: Any) -> tuple[str, ...] | None:
    """The origin of ``url``: scheme, host and port (the scheme's default if none is written),
    lower-cased; ``None`` for no URL. A URL that cannot be parsed is its own origin."""
    if not isinstance(url, str) or not url.strip():
        return None
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return ("unparsed", text)
    scheme = parts.scheme.lower()
    port = port if port is not None else _DEFAULT_PORTS.get(scheme)
    return (scheme, _normal_host(parts.hostname or ""), str(port))


def async_transport(http: ModuleType = httpx, **options: Any) -> Any:
    """A guarded ``AsyncHTTPTransport`` of the ``http`` module (``httpx`` or ``httpx2``, which the
    OpenAI SDK uses), built with ``options``. Refusals raise :class:`EgressRefused`; a name that
    does not resolve raises the module's ``ConnectError``. Without ``verify`` in ``options`` it
    verifies with the process's one TLS context (:func:`shared_tls`)."""
    if "verify" not in options:
        options["verify"] = shared_tls(http)
    return _transport_class(http)(**options)


def shared_tls(http: ModuleType = httpx, *, trust_env: bool = True) -> ssl.SSLContext:
    """One verifying TLS context per process (and HTTP module) for every outbound call. Building
    one reads the whole CA bundle: about 40 ms of CPU that a transport built per call (a connector
    call, a model call, a hook's POST) would otherwise pay each time. A context is safe to share
    between connections and threads; ``trust_env`` reads ``SSL_CERT_FILE``/``SSL_CERT_DIR`` once."""
    return _tls_context(http, trust_env)


@functools.cache
def _tls_context(http: ModuleType, trust_env: bool) -> ssl.SSLContext:
    return http.create_ssl_context(trust_env=trust_env)


@functools.cache
def _transport_class(http: ModuleType) -> type:
    base = http.AsyncHTTPTransport

    class GuardedTransport(base):  # type: ignore[misc,valid-type]
        """Connects only to addresses :func:`checked_addresses` let through, pinned per request."""

        async def handle_async_request(self, request: Any) -> Any:
            url = request.url
            host = url.raw_host.decode("ascii")
            if not host:
                return await super().handle_async_request(request)
            port = url.port or _DEFAULT_PORTS.get(url.scheme, 443)
            try:
                addresses = await checked_addresses(host, port)
            except OSError as exc:
                raise http.ConnectError(f"{host} does not resolve ({exc})", request=request) from None
            failure: Exception | None = None
            for address in addresses:
                pinned = type(request)(
                    request.method,
                    url.copy_with(host=str(address)),
                    headers=request.headers,  # Host names the host, not the address
                    stream=request.stream,
                    extensions={**request.extensions, "sni_hostname": host},
                )
                try:
                    return await super().handle_async_request(pinned)
                except http.ConnectError as exc:  # nothing was sent: the next address may answer
                    failure = exc
            assert failure is not None  # resolve() never answers an empty list
            raise failure

    return GuardedTransport


def _carried_ipv4(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def _normal_host(host: str) -> str:
    return host.strip().lower().rstrip(".")
