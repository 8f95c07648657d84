"""Tamper-evident, append-only logs: each row carries a SHA-256 hash chaining it to the previous row
of its partition (its organisation), so an edit, an insertion or a deletion inside the history is
found by recomputing the chain (``python manage.py audit_verify``).

To chain a model: inherit :class:`ChainLink`, set ``chain_partition`` to the name of the column that
partitions the chain (``"organization_id"``), implement :meth:`ChainLink.chain_payload` (every
field that matters, as plain JSON values), add ``UniqueConstraint(fields=[partition, "chain_seq"])``,
and write rows only through :func:`chain_append`.

Concurrency contract: there is no global lock. Each partition has a head row
(:class:`fimone.models.ChainHead`: its last link's number and hash); appending updates that row,
which locks it until the writing transaction ends, so two writers of one organisation queue while
writers of different organisations proceed side by side; the unique ``(partition, chain_seq)``
constraint turns any fork that slipped past the lock into an error instead of a silent branch. On
PostgreSQL the new link is hashed by the head's ``UPDATE … RETURNING`` itself, from the canonical
text Python prepared around the two values only the head knows (:func:`link_text_pieces`), so an
append is two statements and can join a larger one (a click's decision); on SQLite the IMMEDIATE
transaction already holds the database's single write lock and Python hashes.

What the chain cannot show by itself: rows removed from the *end* of a partition leave a shorter,
valid chain. ``audit_verify`` compares each chain with its head row and prints the head (sequence
number and hash) so that an operator can record it elsewhere (a ticket, a write-once store): the
head row lives in the same database, and whoever can cut rows can rewrite it too.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from django.db import connections, models, router, transaction

from fimone.models import GENESIS, ChainHead

__all__ = ["GENESIS", "ChainLink", "chain_append", "chain_verify", "link_hash"]

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


def link_text_pieces(record: ChainLink) -> tuple[str, str, str]:
    """The canonical text :func:`link_hash` hashes for ``record``, cut where its previous hash and
    its sequence number go: ``before + prev_hash + between + str(seq) + after``. So the database
    can hash the link once it holds the chain's head (:func:`head_advance_sql`) and the text is
    still the one Python's verifier recomputes. The cuts are found with one-off markers."""
    prev_mark = f"\ue000prev-{secrets.token_hex(16)}"
    seq_mark = f"\ue000seq-{secrets.token_hex(16)}"
    document = {**record.chain_document(), "seq": seq_mark}
    text = canonical_json({"prev": prev_mark, "row": document})
    quoted_seq = canonical_json(seq_mark)
    if text.count(prev_mark) != 1 or text.count(quoted_seq) != 1:  # pragma: no cover - 2**-128
        raise ValueError("a chained row contains the hash markers")
    before, rest = text.split(prev_mark)
    between, after = rest.split(quoted_seq)
    return before, between, after


def _head_table() -> str:
    return connections[router.db_for_write(ChainHead)].ops.quote_name(ChainHead._meta.db_table)


def head_advance_sql(record: ChainLink, *, condition: str = "") -> tuple[str, list[Any]]:
    """PostgreSQL: one ``UPDATE … RETURNING seq, prev_hash, entry_hash`` that moves the head of
    ``record``'s partition one link on and hashes the new link in the database. The update locks
    the head row until the transaction ends: that is the partition's lock. Returns no row when the
    partition has no head yet (:func:`_create_head`), or when ``condition`` (SQL, no parameters)
    is false. Usable as a CTE of a larger statement."""
    before, between, after = link_text_pieces(record)
    sql = (
        f"UPDATE {_head_table()} SET seq = seq + 1, prev_hash = entry_hash, "  # noqa: S608 - our names
        "entry_hash = encode(sha256(convert_to("
        "%s || entry_hash || %s || (seq + 1)::text || %s, 'UTF8')), 'hex') "
        "WHERE chain = %s AND partition = %s"
        + (f" AND {condition}" if condition else "")
        + " RETURNING seq, prev_hash, entry_hash"
    )
    model = type(record)
    return sql, [before, between, after, model._meta.label_lower, getattr(record, model.chain_partition)]


def _create_head(model: type[ChainLink], partition: Any, using: str) -> None:
    """Give ``partition`` its head row, at its last link if it has links (written before heads
    existed), else at the start. A concurrent creator's row wins and this adds nothing."""
    last = (
        model._default_manager.using(using)
        .filter(**{model.chain_partition: partition})
        .order_by("-chain_seq")
        .values_list("chain_seq", "entry_hash", "prev_hash")
        .first()
    )
    seq, entry_hash, prev_hash = last if last is not None else (0, GENESIS, GENESIS)
    ChainHead.objects.using(using).bulk_create(
        [
            ChainHead(
                chain=model._meta.label_lower,
                partition=partition,
                seq=seq,
                entry_hash=entry_hash,
                prev_hash=prev_hash,
            )
        ],
        ignore_conflicts=True,
    )


def _advance_head(record: ChainLink, using: str) -> tuple[int, str, str] | None:
    """Move the head of ``record``'s partition one link on; ``(seq, prev_hash, entry_hash)`` of
    the new link, ``None`` if the partition has no head row."""
    model = type(record)
    connection = connections[using]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(*head_advance_sql(record))
            row = cursor.fetchone()
            return (int(row[0]), row[1], row[2]) if row else None
        if connection.vendor != "sqlite":
            raise NotImplementedError(f"no chain head for {connection.vendor}")
        # SQLite: the IMMEDIATE transaction already holds the database's single write lock.
        where = "chain = %s AND partition = %s"
        key = [model._meta.label_lower, getattr(record, model.chain_partition)]
        cursor.execute(f"SELECT seq, entry_hash FROM {_head_table()} WHERE {where}", key)  # noqa: S608
        head = cursor.fetchone()
        if head is None:
            return None
        seq, prev_hash = int(head[0]) + 1, head[1]
        record.chain_seq = seq
        entry_hash = link_hash(prev_hash, record.chain_document())
        cursor.execute(
            f"UPDATE {_head_table()} SET seq = %s, prev_hash = %s, entry_hash = %s WHERE {where}",  # noqa: S608
            [seq, prev_hash, entry_hash, *key],
        )
        return seq, prev_hash, entry_hash


def chain_append(record: Link) -> Link:
    """Insert ``record`` as the next link of its partition's chain and return it.

    Runs in the caller's transaction (or its own): the partition's head row stays locked until
    that transaction ends, and the row, its hash and the head commit or roll back together."""
    model = type(record)
    partition = getattr(record, model.chain_partition)
    if partition is None:
        raise ValueError("a chained row needs its partition")
    using = router.db_for_write(model)
    # Inside the caller's transaction no savepoint (two round trips): a failure here fails that
    # transaction anyway, and the chain must not outlive it.
    in_transaction = connections[using].in_atomic_block
    with transaction.atomic(using=using, savepoint=not in_transaction):
        link = _advance_head(record, using)
        if link is None:  # the partition's first link since heads exist
            _create_head(model, partition, using)
            link = _advance_head(record, using)
        if link is None:  # pragma: no cover - the row was just created
            raise RuntimeError(f"no chain head for {model._meta.label_lower} {partition}")
        record.chain_seq, record.prev_hash, record.entry_hash = link
        record.save(force_insert=True, using=using)
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
    link (a deleted row) is named by the first row after the gap. The chain must also reach its
    head row as read before the links (links appended meanwhile are beyond it): a chain that stops
    short of its head lost rows from its end, one whose link at the head's number has another
    hash was rewritten from there on."""
    head = (
        ChainHead.objects.using(router.db_for_read(model))
        .filter(chain=model._meta.label_lower, partition=partition)
        .values_list("seq", "entry_hash")
        .first()
    )
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
        elif head is not None and row.chain_seq == head[0] and row.entry_hash != head[1]:
            problem = "it is not the link the chain's head recorded (rewritten from here on?)"
        if problem is not None:
            return Verification(
                partition, expected_seq - 1, prev_hash, Break(partition, row.chain_seq, row.pk, problem)
            )
        expected_seq, prev_hash = expected_seq + 1, row.entry_hash
    verified = expected_seq - 1
    if head is not None and verified < head[0]:
        gap = f"#{expected_seq}" + (f" to #{head[0]}" if head[0] > expected_seq else "")
        problem = f"link {gap} is missing from the end of the chain (deleted?): its head is at #{head[0]}"
        return Verification(partition, verified, prev_hash, Break(partition, expected_seq, None, problem))
    return Verification(partition, verified, prev_hash, None)
