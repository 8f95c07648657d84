"""Appending a link: the partition's head row is moved one link on (its lock is the partition's),
in the database's own statement on PostgreSQL, and the new row is inserted with the hash it got."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import connections, router, transaction

from fimone.audit_chain.hashing import head_seal, keyed_link_hash, link_text_pieces, seal_prefix
from fimone.audit_chain.keys import ChainKey, current_key
from fimone.audit_chain.links import ChainLink
from fimone.models import GENESIS, ChainHead

Link = TypeVar("Link", bound=ChainLink)


def _head_table() -> str:
    return connections[router.db_for_write(ChainHead)].ops.quote_name(ChainHead._meta.db_table)


def _sql_hmac(text_sql: str, text_params: list[Any], key: ChainKey) -> tuple[str, list[Any]]:
    """SQL of HMAC-SHA256 (hex) of the text ``text_sql`` computes, with SHA-256 alone."""
    outer, inner = key.pads()
    sql = f"encode(sha256(%s::bytea || sha256(%s::bytea || convert_to({text_sql}, 'UTF8'))), 'hex')"
    return sql, [outer, inner, *text_params]


def head_advance_sql(record: ChainLink, *, condition: str = "") -> tuple[str, list[Any]]:
    """PostgreSQL: one ``UPDATE … RETURNING seq, prev_hash, entry_hash`` that moves the head of
    ``record``'s partition one link on, hashes the new link in the database (HMAC under the
    current key) and seals the head anew. The update locks the head row until the transaction
    ends: that is the partition's lock. Returns no row when the partition has no head yet
    (:func:`_create_head`), or when ``condition`` (SQL, no parameters) is false. Usable as a CTE
    of a larger statement. The padded keys are parameters: bind them server-side (psycopg's own
    cursor), so the statement's text, which the server may log, never holds them."""
    key = current_key()
    before, between, after = link_text_pieces(record)
    model = type(record)
    chain, partition = model._meta.label_lower, getattr(record, model.chain_partition)
    link_sql, link_params = _sql_hmac(
        "%s || entry_hash || %s || (seq + 1)::text || %s", [before, between, after], key
    )
    seal_sql, seal_params = _sql_hmac(
        f"%s || unkeyed_until::text || '|' || (seq + 1)::text || '|' || {link_sql}",
        [seal_prefix(chain, partition), *link_params],
        key,
    )
    sql = (
        f"UPDATE {_head_table()} SET seq = seq + 1, prev_hash = entry_hash, "  # noqa: S608 - our names
        f"entry_hash = {link_sql}, seal = {seal_sql} "
        "WHERE chain = %s AND partition = %s"
        + (f" AND {condition}" if condition else "")
        + " RETURNING seq, prev_hash, entry_hash"
    )
    return sql, [*link_params, *seal_params, chain, partition]


class ChainHeadMissing(RuntimeError):
    """A partition has links but no head row: the head was deleted (a chain is never headless
    since its head is created with its first link). Nothing is appended until an operator has
    looked (``audit_verify`` names it): a head made up at the remaining last link would hide rows
    cut from the end."""


def _create_head(model: type[ChainLink], partition: Any, using: str) -> None:
    """Give ``partition`` its head row, at the start of its chain: a concurrent creator's row wins
    and this adds nothing. Raises :class:`ChainHeadMissing` if the partition has links and still
    no head (links are read first: a concurrent first append commits its link with its head)."""
    chain = model._meta.label_lower
    heads = ChainHead.objects.using(using).filter(chain=chain, partition=partition)
    if model._default_manager.using(using).filter(**{model.chain_partition: partition}).exists():
        if heads.exists():  # created meanwhile, with the chain's first link
            return
        raise ChainHeadMissing(
            f"the audit chain {chain} of organisation {partition} has links but no head row (deleted?): "
            "nothing is appended to it until an operator restores the head; run manage.py audit_verify"
        )
    seal = head_seal(
        current_key(), chain=chain, partition=partition, unkeyed_until=0, seq=0, entry_hash=GENESIS
    )
    ChainHead.objects.using(using).bulk_create(
        [
            ChainHead(
                chain=chain, partition=partition, seq=0, entry_hash=GENESIS, prev_hash=GENESIS, seal=seal
            )
        ],
        ignore_conflicts=True,
    )


def _cursor(connection: Any) -> Any:
    """A cursor of ``connection``; on PostgreSQL one that binds parameters server-side (psycopg's
    own), so that the padded keys :func:`head_advance_sql` passes never appear in a statement's
    text, wrapped as Django wraps its own. Django's cursor while queries are logged (``DEBUG``, a
    test counting them): its log can show a statement only if it was bound client-side."""
    if connection.vendor != "postgresql" or connection.queries_logged:
        return connection.cursor()
    import psycopg  # the driver itself: only a PostgreSQL connection gets here

    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = psycopg.Cursor(connection.connection)
    return connection.make_cursor(raw)


def _advance_head(record: ChainLink, using: str) -> tuple[int, str, str] | None:
    """Move the head of ``record``'s partition one link on; ``(seq, prev_hash, entry_hash)`` of
    the new link, ``None`` if the partition has no head row."""
    model = type(record)
    connection = connections[using]
    with _cursor(connection) as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(*head_advance_sql(record))
            row = cursor.fetchone()
            return (int(row[0]), row[1], row[2]) if row else None
        if connection.vendor != "sqlite":
            raise NotImplementedError(f"no chain head for {connection.vendor}")
        # SQLite: the IMMEDIATE transaction already holds the database's single write lock.
        chain, partition = model._meta.label_lower, getattr(record, model.chain_partition)
        where = "chain = %s AND partition = %s"
        cursor.execute(
            f"SELECT seq, entry_hash, unkeyed_until FROM {_head_table()} WHERE {where}",  # noqa: S608
            [chain, partition],
        )
        head = cursor.fetchone()
        if head is None:
            return None
        key = current_key()
        seq, prev_hash, unkeyed_until = int(head[0]) + 1, head[1], int(head[2])
        record.chain_seq = seq
        entry_hash = keyed_link_hash(key, prev_hash, record.chain_document())
        seal = head_seal(
            key, chain=chain, partition=partition, unkeyed_until=unkeyed_until, seq=seq, entry_hash=entry_hash
        )
        cursor.execute(
            f"UPDATE {_head_table()} SET seq = %s, prev_hash = %s, entry_hash = %s, seal = %s WHERE {where}",  # noqa: S608
            [seq, prev_hash, entry_hash, seal, chain, partition],
        )
        return seq, prev_hash, entry_hash


def chain_append(record: Link) -> Link:
    """Insert ``record`` as the next link of its partition's chain and return it.

    Runs in the caller's transaction (or its own): the partition's head row stays locked until
    that transaction ends, and the row, its hash and the head commit or roll back together.
    Raises :class:`ChainHeadMissing` when the partition's head was deleted."""
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
        if link is None:  # the partition's first link
            _create_head(model, partition, using)
            link = _advance_head(record, using)
        if link is None:  # pragma: no cover - the row was just created
            raise RuntimeError(f"no chain head for {model._meta.label_lower} {partition}")
        record.chain_seq, record.prev_hash, record.entry_hash = link
        record.save(force_insert=True, using=using)
    return record
