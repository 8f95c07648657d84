"""The audit chains' keys: the current one writes, retired ones still verify. Kept outside the
database (``AUDIT_CHAIN_KEY``, ``AUDIT_CHAIN_RETIRED_KEYS``)."""

from __future__ import annotations

import functools
import hashlib
import hmac
from dataclasses import dataclass, field

from django.conf import settings

#: The HMAC block size of SHA-256, in bytes.
_BLOCK = 64


@dataclass(frozen=True)
class ChainKey:
    """An HMAC-SHA256 key of the audit chains. ``key_id`` names it without revealing it (anchors
    and messages say which key signed)."""

    secret: bytes = field(repr=False)

    @functools.cached_property
    def key_id(self) -> str:
        return hmac.new(self.secret, b"fimone-audit-key-id", hashlib.sha256).hexdigest()[:16]

    def mac(self, text: str) -> str:
        """HMAC-SHA256 (hex) of ``text`` in UTF-8."""
        return hmac.new(self.secret, text.encode("utf-8"), hashlib.sha256).hexdigest()

    def pads(self) -> tuple[bytes, bytes]:
        """``(K ⊕ opad, K ⊕ ipad)``: what SQL needs to compute this HMAC with SHA-256 alone."""
        key = hashlib.sha256(self.secret).digest() if len(self.secret) > _BLOCK else self.secret
        key = key.ljust(_BLOCK, b"\0")
        return bytes(b ^ 0x5C for b in key), bytes(b ^ 0x36 for b in key)

    def derived(self, purpose: str) -> ChainKey:
        """Another key for ``purpose`` (anchor signatures), computed from this one."""
        return ChainKey(hmac.new(self.secret, f"fimone-{purpose}".encode(), hashlib.sha256).digest())


@functools.lru_cache(maxsize=8)
def _keys(current: str | None, retired: tuple[str, ...], secret_key: str) -> tuple[ChainKey, ...]:
    if current:
        first = ChainKey(current.encode("utf-8"))
    else:  # development: derived from SECRET_KEY, like FIELD_ENCRYPTION_KEY
        first = ChainKey(hashlib.sha256(b"fimone-audit-chain:" + secret_key.encode("utf-8")).digest())
    return (first, *(ChainKey(key.encode("utf-8")) for key in retired))


def chain_keys() -> tuple[ChainKey, ...]:
    """The keyring: the current key (``AUDIT_CHAIN_KEY``; in development derived from
    ``SECRET_KEY``) first, which writes, then the retired ones, which still verify."""
    return _keys(
        settings.AUDIT_CHAIN_KEY,
        tuple(getattr(settings, "AUDIT_CHAIN_RETIRED_KEYS", ())),
        settings.SECRET_KEY,
    )


def current_key() -> ChainKey:
    return chain_keys()[0]
