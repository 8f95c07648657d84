"""Anchors: the signed head of a chain, printed for safekeeping outside the database
(``manage.py audit_anchor``) and checked later (``audit_verify --anchor``)."""

from __future__ import annotations

import datetime as dt
import hmac
from typing import Any

from fimone.audit_chain.hashing import canonical_json, canonical_time
from fimone.audit_chain.keys import chain_keys, current_key

#: What an anchor's signature key is derived for (:meth:`ChainKey.derived`).
ANCHOR_PURPOSE = "audit-anchor"


def anchor_entry(
    *, chain: str, partition: Any, seq: int, entry_hash: str, anchored_at: dt.datetime
) -> dict[str, Any]:
    """The anchor of one chain's head: where it ends and when that was read, signed with an HMAC
    under a key derived from the current chain key (a signature cannot pass for a link or a seal)."""
    key = current_key()
    entry = {
        "chain": chain,
        "organisation": partition,
        "seq": seq,
        "hash": entry_hash,
        "anchored_at": canonical_time(anchored_at),
        "key": key.key_id,
    }
    return {**entry, "signature": key.derived(ANCHOR_PURPOSE).mac(canonical_json(entry))}


def anchor_unsigned(entry: dict[str, Any]) -> bool:
    """Whether ``entry`` is not an anchor signed with a key of the keyring (edited, forged)."""
    signature = entry.get("signature")
    if not isinstance(signature, str):
        return True
    text = canonical_json({name: value for name, value in entry.items() if name != "signature"})
    return all(
        not hmac.compare_digest(key.derived(ANCHOR_PURPOSE).mac(text), signature) for key in chain_keys()
    )
