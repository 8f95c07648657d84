"""What a provider publishes: its discovery document and its signing keys, fetched and cached.

The discovery document (``<issuer>/.well-known/openid-configuration``) is cached for
``SSO_METADATA_SECONDS``; its ``issuer`` must be exactly the configured one (OpenID Connect
Discovery §4.3), or nothing of it is used. The key set (``jwks_uri``) is cached as long; a token
signed with a key id the cached set lacks makes one fresh fetch (the provider rotated its keys), and
a key id still unknown after it is refused. Every address fetched (and every endpoint the document
names, the token and userinfo endpoints included) must pass the egress guard (docs/design.md §1.14): a
provider inside the network is reached only when ``EGRESS_ALLOW`` names it.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
from django.conf import settings
from django.core.cache import cache

from fimone.egress import EgressRefused, allow_list, check_address, shared_tls

ENDPOINTS = (
    "authorization_endpoint",
    "token_endpoint",
    "userinfo_endpoint",
    "jwks_uri",
    "end_session_endpoint",
)
SUPPORTED_ALGORITHMS = ("RS256", "ES256", "PS256", "RS384", "RS512", "ES384")


class ProviderUnavailable(Exception):
    """The provider's documents could not be fetched or make no sense; the message says which, in
    words an admin can act on (no secrets in it)."""


@dataclass(frozen=True)
class Metadata:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str
    jwks_uri: str
    end_session_endpoint: str
    algorithm: str


def check_reachable(url: str) -> None:
    """Refuse (``ProviderUnavailable``) a URL whose host resolves to an address the egress guard
    refuses. Checked before each fetch; the library's own token and userinfo requests go to
    endpoints checked here when the document was read."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProviderUnavailable(f"{url!r} is not an http(s) address")
    if parts.scheme == "http" and settings.FIMONE_ENV == "production" and not _is_loopback(parts.hostname):
        raise ProviderUnavailable(f"{parts.hostname} must be reached over https")
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ProviderUnavailable(f"{parts.hostname} does not resolve ({exc.strerror or exc})") from None
    allowed = allow_list()
    for info in infos:
        try:
            check_address(parts.hostname, ipaddress.ip_address(info[4][0]), allowed)
        except EgressRefused as exc:
            raise ProviderUnavailable(str(exc)) from None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _get_json(url: str) -> dict[str, Any]:
    check_reachable(url)
    try:
        response = httpx.get(
            url, timeout=settings.SSO_HTTP_TIMEOUT, follow_redirects=False, verify=shared_tls()
        )
    except httpx.HTTPError as exc:
        raise ProviderUnavailable(f"{url} did not answer ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise ProviderUnavailable(f"{url} answered {response.status_code}")
    try:
        document = response.json()
    except ValueError:
        raise ProviderUnavailable(f"{url} did not answer JSON") from None
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} did not answer a JSON object")
    return document


def metadata_of(issuer: str, *, fresh: bool = False) -> Metadata:
    """The provider's endpoints, from its discovery document (cached)."""
    key = f"sso:metadata:{issuer}"
    document = None if fresh else cache.get(key)
    if document is None:
        document = _get_json(issuer.rstrip("/") + "/.well-known/openid-configuration")
        if document.get("issuer") != issuer:
            raise ProviderUnavailable(
                f"the provider calls itself {document.get('issuer')!r}, not {issuer!r}: check the issuer"
            )
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(document.get(name), str):
                raise ProviderUnavailable(f"the provider's discovery document has no {name}")
        for name in ENDPOINTS:
            if isinstance(document.get(name), str):
                check_reachable(document[name])
        cache.set(key, document, settings.SSO_METADATA_SECONDS)
    offered = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    algorithm = next((a for a in SUPPORTED_ALGORITHMS if a in offered), "")
    if not algorithm:
        raise ProviderUnavailable(
            f"the provider signs ID tokens with {offered}, none of {SUPPORTED_ALGORITHMS}"
        )
    return Metadata(
        issuer=document["issuer"],
        authorization_endpoint=document["authorization_endpoint"],
        token_endpoint=document["token_endpoint"],
        userinfo_endpoint=str(document.get("userinfo_endpoint") or ""),
        jwks_uri=document["jwks_uri"],
        end_session_endpoint=str(document.get("end_session_endpoint") or ""),
        algorithm=algorithm,
    )


def _key_set(jwks_uri: str, *, fresh: bool) -> dict[str, Any]:
    key = f"sso:jwks:{jwks_uri}"
    keys = None if fresh else cache.get(key)
    if keys is None:
        keys = _get_json(jwks_uri)
        if not isinstance(keys.get("keys"), list):
            raise ProviderUnavailable(f"{jwks_uri} holds no key set")
        cache.set(key, keys, settings.SSO_METADATA_SECONDS)
    return keys


def _matching(keys: dict[str, Any], kid: str | None, algorithm: str) -> jwt.PyJWK | None:
    for candidate in keys["keys"]:
        if not isinstance(candidate, dict) or candidate.get("use", "sig") != "sig":
            continue
        if kid is not None and candidate.get("kid") != kid:
            continue
        if candidate.get("alg", algorithm) != algorithm:
            continue
        try:
            return jwt.PyJWK(candidate, algorithm=algorithm)
        except jwt.PyJWTError:
            continue
    return None


def signing_key(metadata: Metadata, token: str) -> jwt.PyJWK:
    """The provider's key that signed ``token`` (by its header's ``kid``), from the cached key set
    or, when the set lacks it, from a fresh one. Raises ``jwt.InvalidTokenError`` when no key
    matches: a token signed by a key the provider does not publish."""
    header = jwt.get_unverified_header(token)
    if header.get("alg") != metadata.algorithm:
        raise jwt.InvalidAlgorithmError(
            f"the token is signed with {header.get('alg')!r}, not {metadata.algorithm}"
        )
    kid = header.get("kid")
    found = _matching(_key_set(metadata.jwks_uri, fresh=False), kid, metadata.algorithm)
    if found is None:
        found = _matching(_key_set(metadata.jwks_uri, fresh=True), kid, metadata.algorithm)
    if found is None:
        raise jwt.InvalidKeyError(f"the provider publishes no key {kid!r}")
    return found
