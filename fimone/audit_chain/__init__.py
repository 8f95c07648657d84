"""Tamper-evident, append-only logs: each row carries an HMAC-SHA256 chaining it to the previous
row of its partition (its organisation), keyed by ``AUDIT_CHAIN_KEY``, a secret kept outside the
database; an edit, an insertion or a deletion inside the history is found by recomputing the chain
(``python manage.py audit_verify``), and whoever can write the database but does not hold the key
cannot recompute it.

To chain a model: inherit :class:`ChainLink`, set ``chain_partition`` to the name of the column that
partitions the chain (``"organization_id"``), implement :meth:`ChainLink.chain_payload` (every
field that matters, as plain JSON values), add ``UniqueConstraint(fields=[partition, "chain_seq"])``,
and write rows only through :func:`chain_append`. The ORM refuses to update or delete a link
(:class:`fimone.models.AppendOnlyQuerySet`); on PostgreSQL a trigger refuses it too.

Concurrency contract: there is no global lock. Each partition has a head row
(:class:`fimone.models.ChainHead`: its last link's number and hash, sealed by an HMAC); appending
updates that row, which locks it until the writing transaction ends, so two writers of one
organisation queue while writers of different organisations proceed side by side; the unique
``(partition, chain_seq)`` constraint turns any fork that slipped past the lock into an error
instead of a silent branch. On PostgreSQL the new link is hashed by the head's
``UPDATE … RETURNING`` itself, from the canonical text Python prepared around the two values only
the head knows (:func:`link_text_pieces`), so an append is two statements and can join a larger
one (a click's decision). PostgreSQL has SHA-256 but no HMAC without an extension, so the
statement computes ``HMAC(K, m) = H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ m))`` from the two padded keys,
passed as parameters of the statement: the key is never stored. On SQLite the IMMEDIATE
transaction already holds the database's single write lock and Python hashes.

Versions of a link: links written before the chain was keyed are plain SHA-256 (:func:`link_hash`)
and stay so; the head's ``unkeyed_until`` says how many there are, and the head's seal covers that
number, so a keyed link cannot be rewritten as an unkeyed one. Every later link is an HMAC under
the current key or a retired one (``AUDIT_CHAIN_RETIRED_KEYS``: rotating the key leaves the links
it wrote verifiable).

What a keyed chain cannot show by itself: a rewrite by someone who holds the key, and rows cut
from the end of a partition together with a head restored from an earlier copy. ``manage.py
audit_anchor`` prints the signed head of every chain for safekeeping outside the database, and
``audit_verify --anchor`` checks that each chain still holds, at each anchored number, the
anchored hash.

The package is split by concern, lowest first: :mod:`~fimone.audit_chain.links` (the chained
models' fields), :mod:`~fimone.audit_chain.keys` (the keyring), :mod:`~fimone.audit_chain.hashing`
(canonical text, link hashes, head seals), then :mod:`~fimone.audit_chain.appending`,
:mod:`~fimone.audit_chain.verifying` and :mod:`~fimone.audit_chain.anchors`, which use them and not
one another. Import from the package: it names the whole contract.
"""

from __future__ import annotations

from fimone.audit_chain.anchors import ANCHOR_PURPOSE, anchor_entry, anchor_unsigned
from fimone.audit_chain.appending import ChainHeadMissing, chain_append, head_advance_sql
from fimone.audit_chain.hashing import (
    canonical_digest,
    canonical_json,
    canonical_time,
    head_seal,
    keyed_link_hash,
    link_hash,
    link_text_pieces,
)
from fimone.audit_chain.keys import ChainKey, chain_keys, current_key
from fimone.audit_chain.links import ChainLink
from fimone.audit_chain.verifying import Break, Verification, chain_verify, link_at
from fimone.models import GENESIS, AppendOnlyError

__all__ = [
    "ANCHOR_PURPOSE",
    "GENESIS",
    "AppendOnlyError",
    "Break",
    "ChainHeadMissing",
    "ChainKey",
    "ChainLink",
    "Verification",
    "anchor_entry",
    "anchor_unsigned",
    "canonical_digest",
    "canonical_json",
    "canonical_time",
    "chain_append",
    "chain_keys",
    "chain_verify",
    "current_key",
    "head_advance_sql",
    "head_seal",
    "keyed_link_hash",
    "link_at",
    "link_hash",
    "link_text_pieces",
]
