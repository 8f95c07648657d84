"""The canonical text of a link and of a head, and their hashes: what Python's verifier
recomputes and what the database hashes when it appends (:func:`link_text_pieces`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from typing import TYPE_CHECKING, Any

from fimone.audit_chain.keys import ChainKey

if TYPE_CHECKING:
    from fimone.audit_chain.links import ChainLink


def _normalised(value: Any) -> Any:
    """JSON values as any database returns them: PostgreSQL's jsonb gives back ``1e20`` as an
    integer, so an integral float is hashed as the integer it reads back as."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("audit rows hold finite numbers only")
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        return {str(key): _normalised(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_normalised(item) for item in value]
    return value


def canonical_json(value: Any) -> str:
    """One text per value: sorted keys, no whitespace, UTF-8 kept, integral floats as integers."""
    return json.dumps(_normalised(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_digest(value: Any) -> str:
    """SHA-256 (hex) of :func:`canonical_json` of ``value``: the same for a value and for what the
    database gives back of it."""
    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()


def canonical_time(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")


def link_text(prev_hash: str, document: dict[str, Any]) -> str:
    """The canonical text a link's hash covers: its previous hash and the row's document."""
    return canonical_json({"prev": prev_hash, "row": document})


def link_hash(prev_hash: str, document: dict[str, Any]) -> str:
    """The unkeyed hash of a link written before the chain was keyed: SHA-256 (hex) of the
    canonical JSON of the previous hash and the row's document. (The chain migrations hashed the
    rows they chained with it.)"""
    return hashlib.sha256(link_text(prev_hash, document).encode("utf-8")).hexdigest()


def keyed_link_hash(key: ChainKey, prev_hash: str, document: dict[str, Any]) -> str:
    """The hash of a link: HMAC-SHA256 (hex) under ``key`` of the text :func:`link_hash` hashes."""
    return key.mac(link_text(prev_hash, document))


def seal_prefix(chain: str, partition: Any) -> str:
    """The start of the text a head's seal covers: which chain, which partition."""
    return f"fimone-audit-head|{chain}|{partition}|"


def seal_text(*, chain: str, partition: Any, unkeyed_until: Any, seq: Any, entry_hash: str) -> str:
    """What a head's seal covers: which chain, how many unkeyed links, where it ends."""
    return f"{seal_prefix(chain, partition)}{unkeyed_until}|{seq}|{entry_hash}"


def head_seal(
    key: ChainKey, *, chain: str, partition: Any, unkeyed_until: int, seq: int, entry_hash: str
) -> str:
    """The seal of a head row: HMAC under ``key`` of what the row says (:func:`seal_text`)."""
    return key.mac(
        seal_text(
            chain=chain, partition=partition, unkeyed_until=unkeyed_until, seq=seq, entry_hash=entry_hash
        )
    )


def link_text_pieces(record: ChainLink) -> tuple[str, str, str]:
    """The canonical text a link's hash covers for ``record``, cut where its previous hash and
    its sequence number go: ``before + prev_hash + between + str(seq) + after``. So the database
    can hash the link once it holds the chain's head (:func:`head_advance_sql`) and the text is
    still the one Python's verifier recomputes. The cuts are found with one-off markers."""
    prev_mark = f"\ue000prev-{secrets.token_hex(16)}"
    seq_mark = f"\ue000seq-{secrets.token_hex(16)}"
    document = {**record.chain_document(), "seq": seq_mark}
    text = link_text(prev_mark, document)
    quoted_seq = canonical_json(seq_mark)
    if text.count(prev_mark) != 1 or text.count(quoted_seq) != 1:  # pragma: no cover - 2**-128
        raise ValueError("a chained row contains the hash markers")
    before, rest = text.split(prev_mark)
    between, after = rest.split(quoted_seq)
    return before, between, after
