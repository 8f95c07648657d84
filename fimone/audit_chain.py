"""Tamper-evident, append-only logs: each row carries a SHA-256 hash chaining it to the previous row
of its partition (its organisation), so an edit, an insertion or a deletion inside the history is
found by recomputing the chain (``python manage.py audit_verify``).

To chain a model: inherit :class:`ChainLink`, set ``chain_partition`` to the name of the column that
partitions the chain (``"organization_id"``), implement :meth:`ChainLink.chain_payload` (every
field that matters, as plain JSON values), add ``UniqueConstraint(fields=[partition, "chain_seq"])``,
and write rows only through :func:`chain_append`.

Concurrency contract: there is no global lock. Appending takes a lock of the row's partition only,
held until the writing transaction ends, so two writers of one organisation queue while writers of
different organisations proceed side by side; the unique ``(partition, chain_seq)`` constraint turns
any fork that slipped past the lock into an error instead of a silent branch. On PostgreSQL the lock
is a transaction-scoped advisory lock keyed by the chain and the partition; on SQLite every write
transaction already holds the database's single write lock (``transaction_mode=IMMEDIATE``).

What the chain cannot show by itself: rows removed from the *end* of a partition leave a shorter,
valid chain. ``audit_verify`` prints each partition's head (sequence number and hash) so that an
operator can record it elsewhere (a ticket, a write-once store) and compare later.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from django.db import connections, models, router, transaction

GENESIS = "0" * 64

Link = TypeVar("Link", bound="ChainLink")


class ChainLink(models.Model):
    """Fields of a row of a hash chain (abstract). ``chain_seq`` counts from 1 in each partition."""

    chain_seq = models.PositiveBigIntegerField(editable=False)
    prev_hash = models.CharField(max_length=64, editable=False)
    entry_hash = models.CharField(
        max_length=64, editable=False, help_text="SHA-256 of this row and prev_hash."
    )

    chain_partition: ClassVar[str] = "organization_id"

    class Meta:
        abstract = True

    def chain_payload(self) -> dict[str, Any]:
        """The row's content as JSON values (the chain's position fields are added by the caller)."""
        raise NotImplementedError

    def chain_document(self) -> dict[str, Any]:
        """What :func:`link_hash` covers besides the previous hash: the content and its position."""
        return {
            "chain": self._meta.label_lower,
            "partition": getattr(self, self.chain_partition),
            "seq": self.chain_seq,
            "row": self.chain_payload(),
        }


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


def canonical_time(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")


def link_hash(prev_hash: str, document: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the previous hash and the row's document."""
    text = canonical_json({"prev": prev_hash, "row": document})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _lock_partition(model: type[ChainLink], partition: Any) -> None:
    connection = connections[router.db_for_write(model)]
    if connection.vendor == "postgresql":
        digest = hashlib.sha256(f"{model._meta.label_lower}:{partition}".encode()).digest()
        key = int.from_bytes(digest[:8], "big", signed=True)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])
    elif connection.vendor != "sqlite":  # SQLite: the IMMEDIATE transaction is the lock
        raise NotImplementedError(f"no chain lock for {connection.vendor}")


def chain_append(record: Link) -> Link:
    """Insert ``record`` as the next link of its partition's chain and return it.

    Runs in the caller's transaction (or its own): the partition lock is held until that
    transaction ends, and the row and its hash commit or roll back together."""
    model = type(record)
    partition = getattr(record, model.chain_partition)
    if partition is None:
        raise ValueError("a chained row needs its partition")
    using = router.db_for_write(model)
    # Inside the caller's transaction no savepoint (two round trips): a failure here fails that
    # transaction anyway, and the chain must not outlive it.
    in_transaction = connections[using].in_atomic_block
    with transaction.atomic(using=using, savepoint=not in_transaction):
        _lock_partition(model, partition)
        head = (
            model._default_manager.filter(**{model.chain_partition: partition})
            .order_by("-chain_seq")
            .values_list("chain_seq", "entry_hash")
            .first()
        )
        record.chain_seq, record.prev_hash = (head[0] + 1, head[1]) if head else (1, GENESIS)
        record.entry_hash = link_hash(record.prev_hash, record.chain_document())
        record.save(force_insert=True)
    return record


@dataclass(frozen=True)
class Break:
    """The first link of a partition that does not verify."""

    partition: Any
    seq: int
    pk: Any
    problem: str

    def __str__(self) -> str:
        return f"partition {self.partition}: link #{self.seq} (row {self.pk}): {self.problem}"


@dataclass(frozen=True)
class Verification:
    """A partition's chain as recomputed: how many links verified, the last verified hash, and
    the first break (``None`` when every link verifies)."""

    partition: Any
    verified: int
    head_hash: str
    broken: Break | None


def chain_verify(model: type[ChainLink], partition: Any) -> Verification:
    """Recompute ``partition``'s chain from its first link and stop at the first break. A missing
    link (a deleted row) is named by the first row after the gap."""
    expected_seq, prev_hash = 1, GENESIS
    rows: Iterator[ChainLink] = (
        model._default_manager.filter(**{model.chain_partition: partition})
        .order_by("chain_seq")
        .iterator(chunk_size=2000)
    )
    for row in rows:
        problem = None
        if row.chain_seq != expected_seq:
            gap = f"#{expected_seq}" + (
                f" to #{row.chain_seq - 1}" if row.chain_seq - 1 > expected_seq else ""
            )
            problem = f"link {gap} is missing (deleted?) before it"
        elif row.prev_hash != prev_hash:
            problem = "its previous hash does not match the link before it"
        elif link_hash(prev_hash, row.chain_document()) != row.entry_hash:
            problem = "its content does not match its hash (edited?)"
        if problem is not None:
            return Verification(
                partition, expected_seq - 1, prev_hash, Break(partition, row.chain_seq, row.pk, problem)
            )
        expected_seq, prev_hash = expected_seq + 1, row.entry_hash
    return Verification(partition, expected_seq - 1, prev_hash, None)
