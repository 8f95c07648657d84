"""Recomputing a partition's chain from its first link, up to its head, and naming the first break."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import router

from fimone.audit_chain.hashing import link_text, seal_text
from fimone.audit_chain.keys import ChainKey, chain_keys
from fimone.audit_chain.links import ChainLink
from fimone.models import GENESIS, ChainHead


@dataclass(frozen=True)
class Break:
    """The first problem of a partition's chain: a link that does not verify (``seq``, ``pk``),
    or the chain's head itself (``seq`` ``None``: missing, unsealed)."""

    partition: Any
    seq: int | None
    pk: Any
    problem: str

    def __str__(self) -> str:
        where = "its head" if self.seq is None else f"link #{self.seq} (row {self.pk})"
        return f"partition {self.partition}: {where}: {self.problem}"


@dataclass(frozen=True)
class Verification:
    """A partition's chain as recomputed: how many links verified, the last verified hash, and
    the first break (``None`` when every link verifies)."""

    partition: Any
    verified: int
    head_hash: str
    broken: Break | None


def _keyed_by(keys: tuple[ChainKey, ...], text: str, digest: str) -> ChainKey | None:
    """Which key of ``keys`` gives ``digest`` as the HMAC of ``text`` (the first tried first)."""
    for key in keys:
        if hmac.compare_digest(key.mac(text), digest):
            return key
    return None


def _head_problem(
    chain: str, partition: Any, head: tuple[Any, ...], keys: tuple[ChainKey, ...]
) -> str | None:
    seq, entry_hash, unkeyed_until, seal = head
    if not seal:
        return "its head is not sealed (made outside the chain's code?)"
    text = seal_text(
        chain=chain, partition=partition, unkeyed_until=unkeyed_until, seq=seq, entry_hash=entry_hash
    )
    if _keyed_by(keys, text, seal) is None:
        return "its head's seal does not match it under the audit key (the head was rewritten?)"
    if unkeyed_until > seq:
        return f"its head counts {unkeyed_until} unkeyed links but ends at #{seq}"
    return None


def chain_verify(model: type[ChainLink], partition: Any) -> Verification:
    """Recompute ``partition``'s chain from its first link and stop at the first problem.

    The head row (read before the links: links appended meanwhile are beyond it) must exist and
    carry a seal made with a key of the keyring. Links up to the head's ``unkeyed_until`` are
    plain SHA-256, every later one an HMAC under a key of the keyring (one that is a plain
    SHA-256 instead was recomputed without the key). A missing link (a deleted row) is named by
    the first row after the gap. The chain must reach its head: a chain that stops short of it
    lost rows from its end, one whose link at the head's number has another hash was rewritten
    from there on."""
    chain = model._meta.label_lower
    using = router.db_for_read(model)
    head = (
        ChainHead.objects.using(using)
        .filter(chain=chain, partition=partition)
        .values_list("seq", "entry_hash", "unkeyed_until", "seal")
        .first()
    )
    links = model._default_manager.using(using).filter(**{model.chain_partition: partition})
    if head is None:
        count = links.count()
        problem = (
            f"its head row is missing (deleted?) and {count} links remain without it"
            if count
            else "no link and no head: the whole chain is missing (deleted?)"
        )
        return Verification(partition, 0, GENESIS, Break(partition, None, None, problem))
    keys = chain_keys()
    problem = _head_problem(chain, partition, head, keys)
    if problem is not None:
        return Verification(partition, 0, GENESIS, Break(partition, None, None, problem))
    head_seq, head_hash, unkeyed_until = int(head[0]), head[1], int(head[2])
    expected_seq, prev_hash = 1, GENESIS
    rows: Iterator[ChainLink] = links.order_by("chain_seq").iterator(chunk_size=2000)
    for row in rows:
        problem = None
        if row.chain_seq != expected_seq:
            gap = f"#{expected_seq}" + (
                f" to #{row.chain_seq - 1}" if row.chain_seq - 1 > expected_seq else ""
            )
            problem = f"link {gap} is missing (deleted?) before it"
        elif row.prev_hash != prev_hash:
            problem = "its previous hash does not match the link before it"
        else:
            problem, keys = _link_problem(row, prev_hash, unkeyed_until, keys)
        if problem is None and row.chain_seq == head_seq and row.entry_hash != head_hash:
            problem = "it is not the link the chain's head recorded (rewritten from here on?)"
        if problem is not None:
            return Verification(
                partition, expected_seq - 1, prev_hash, Break(partition, row.chain_seq, row.pk, problem)
            )
        expected_seq, prev_hash = expected_seq + 1, row.entry_hash
    verified = expected_seq - 1
    if verified < head_seq:
        gap = f"#{expected_seq}" + (f" to #{head_seq}" if head_seq > expected_seq else "")
        problem = f"link {gap} is missing from the end of the chain (deleted?): its head is at #{head_seq}"
        return Verification(partition, verified, prev_hash, Break(partition, expected_seq, None, problem))
    return Verification(partition, verified, prev_hash, None)


def _link_problem(
    row: ChainLink, prev_hash: str, unkeyed_until: int, keys: tuple[ChainKey, ...]
) -> tuple[str | None, tuple[ChainKey, ...]]:
    """What is wrong with ``row``'s hash (``None``: nothing), and the keyring with the key that
    verified it first: the next link most likely has the same one, so after a rotation links are
    not tried against the other key each time."""
    text = link_text(prev_hash, row.chain_document())
    plain = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if row.chain_seq <= unkeyed_until:
        return (None if plain == row.entry_hash else "its content does not match its hash (edited?)"), keys
    key = _keyed_by(keys, text, row.entry_hash)
    if key is not None:
        return None, keys if key is keys[0] else (key, *(k for k in keys if k is not key))
    if plain == row.entry_hash:
        return "its hash is a plain SHA-256, not keyed: it was recomputed without the audit key", keys
    return "its content does not match its hash (edited?)", keys


def link_at(model: type[ChainLink], partition: Any, seq: int) -> str | None:
    """The stored hash of link ``seq`` of ``partition``'s chain (``None``: no such row)."""
    return (
        model._default_manager.filter(**{model.chain_partition: partition, "chain_seq": seq})
        .values_list("entry_hash", flat=True)
        .first()
    )
