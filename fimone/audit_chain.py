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
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn, TypeVar

from django.conf import settings
from django.db import connections, models, router, transaction

from fimone.models import GENESIS, AppendOnlyError, AppendOnlyQuerySet, ChainHead, refuse_change

__all__ = [
    "GENESIS",
    "AppendOnlyError",
    "ChainHeadMissing",
    "ChainKey",
    "ChainLink",
    "anchor_entry",
    "anchor_unsigned",
    "chain_append",
    "chain_keys",
    "chain_verify",
    "current_key",
    "head_seal",
    "keyed_link_hash",
    "link_hash",
]

Link = TypeVar("Link", bound="ChainLink")

#: The HMAC block size of SHA-256, in bytes.
_BLOCK = 64


class ChainLink(models.Model):
    """Fields of a row of a hash chain (abstract). ``chain_seq`` counts from 1 in each partition.

    Append-only: rows are inserted by :func:`chain_append`; the ORM refuses ``update()``,
    ``delete()``, saving a stored row and deleting one (:class:`AppendOnlyError`)."""

    chain_seq = models.PositiveBigIntegerField(editable=False)
    prev_hash = models.CharField(max_length=64, editable=False)
    entry_hash = models.CharField(
        max_length=64,
        editable=False,
        help_text="HMAC-SHA256 under AUDIT_CHAIN_KEY of this row and prev_hash (plain SHA-256 for "
        "links written before the chain was keyed).",
    )

    chain_partition: ClassVar[str] = "organization_id"

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            refuse_change(type(self), "save of a stored row")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse_change(type(self), "delete")

    def chain_payload(self) -> dict[str, Any]:
        """The row's content as JSON values (the chain's position fields are added by the caller)."""
        raise NotImplementedError

    def chain_document(self) -> dict[str, Any]:
        """What a link's hash covers besides the previous hash: the content and its position."""
        return {
            "chain": self._meta.label_lower,
            "partition": getattr(self, self.chain_partition),
            "seq": self.chain_seq,
            "row": self.chain_payload(),
        }


# --- the key --------------------------------------------------------------------------------------


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


# --- canonical text -------------------------------------------------------------------------------


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


def _link_text(prev_hash: str, document: dict[str, Any]) -> str:
    return canonical_json({"prev": prev_hash, "row": document})


def link_hash(prev_hash: str, document: dict[str, Any]) -> str:
    """The unkeyed hash of a link written before the chain was keyed: SHA-256 (hex) of the
    canonical JSON of the previous hash and the row's document. (The chain migrations hashed the
    rows they chained with it.)"""
    return hashlib.sha256(_link_text(prev_hash, document).encode("utf-8")).hexdigest()


def keyed_link_hash(key: ChainKey, prev_hash: str, document: dict[str, Any]) -> str:
    """The hash of a link: HMAC-SHA256 (hex) under ``key`` of the text :func:`link_hash` hashes."""
    return key.mac(_link_text(prev_hash, document))


def _seal_prefix(chain: str, partition: Any) -> str:
    return f"fimone-audit-head|{chain}|{partition}|"


def head_seal(
    key: ChainKey, *, chain: str, partition: Any, unkeyed_until: int, seq: int, entry_hash: str
) -> str:
    """The seal of a head row: HMAC under ``key`` of what the row says (which chain, how many
    unkeyed links, where it ends)."""
    return key.mac(f"{_seal_prefix(chain, partition)}{unkeyed_until}|{seq}|{entry_hash}")


def link_text_pieces(record: ChainLink) -> tuple[str, str, str]:
    """The canonical text a link's hash covers for ``record``, cut where its previous hash and
    its sequence number go: ``before + prev_hash + between + str(seq) + after``. So the database
    can hash the link once it holds the chain's head (:func:`head_advance_sql`) and the text is
    still the one Python's verifier recomputes. The cuts are found with one-off markers."""
    prev_mark = f"\ue000prev-{secrets.token_hex(16)}"
    seq_mark = f"\ue000seq-{secrets.token_hex(16)}"
    document = {**record.chain_document(), "seq": seq_mark}
    text = _link_text(prev_mark, document)
    quoted_seq = canonical_json(seq_mark)
    if text.count(prev_mark) != 1 or text.count(quoted_seq) != 1:  # pragma: no cover - 2**-128
        raise ValueError("a chained row contains the hash markers")
    before, rest = text.split(prev_mark)
    between, after = rest.split(quoted_seq)
    return before, between, after


# --- appending ------------------------------------------------------------------------------------


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
        [_seal_prefix(chain, partition), *link_params],
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
    import psycopg

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


# --- verifying ------------------------------------------------------------------------------------


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
    text = f"{_seal_prefix(chain, partition)}{unkeyed_until}|{seq}|{entry_hash}"
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
    text = _link_text(prev_hash, row.chain_document())
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


# --- anchors --------------------------------------------------------------------------------------

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
