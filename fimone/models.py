"""The project's own tables: the head of each tamper-evident audit chain (fimone/audit_chain/),
and the guard every append-only audit table shares."""

from __future__ import annotations

from typing import Any, NoReturn

from django.db import models

#: The previous hash of a chain's first link.
GENESIS = "0" * 64


class AppendOnlyError(PermissionError, ValueError):
    """A change or a deletion of a row of the append-only audit record (docs/design.md §1.15): rows are
    inserted, never updated or deleted, through the ORM as through SQL (on PostgreSQL triggers
    refuse it too). A ``PermissionError`` and, as the first guards raised, a ``ValueError``."""


def refuse_change(model: type[models.Model], what: str) -> NoReturn:
    raise AppendOnlyError(
        f"{model._meta.verbose_name_plural} are append-only: {what} refused (the audit record is "
        "never rewritten, DESIGN §1.15)"
    )


class AppendOnlyQuerySet(models.QuerySet):
    """A queryset of an audit table: ``update()``, ``bulk_update()`` and ``delete()`` raise
    :class:`AppendOnlyError` before any SQL is sent or any transaction is opened (the caller's
    stays usable). Rows are only ever inserted."""

    def update(self, **kwargs: Any) -> NoReturn:
        refuse_change(self.model, "update")

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> NoReturn:
        refuse_change(self.model, "update")

    def delete(self) -> NoReturn:
        refuse_change(self.model, "delete")

    def _raw_delete(self, using: Any) -> NoReturn:
        refuse_change(self.model, "delete")


class ChainHead(models.Model):
    """Where one partition of one audit chain ends: its last link's sequence number and hash.

    Appending a link updates this row (``UPDATE … RETURNING``), so the row is also the partition's
    lock: writers of one organisation's chain queue on it until their transaction ends, writers of
    other organisations (other rows) do not wait. ``seq`` 0 and :data:`GENESIS` for an empty chain.
    A cache of the chain's last row, kept in the same transaction; ``audit_verify`` checks it.

    ``seal`` is an HMAC under ``AUDIT_CHAIN_KEY`` of the whole row (:func:`fimone.audit_chain.head_seal`),
    rewritten by every append: a head moved back over rows cut from the end, or re-created after
    its deletion, does not carry a seal its writer could compute without the key. Links up to
    ``unkeyed_until`` were written before the chain was keyed (plain SHA-256); the seal covers
    that number, so no later link can be passed off as one of them.

    Written only by the chain's code (raw SQL): the ORM refuses ``update()``, ``delete()`` and
    saving a loaded row; on PostgreSQL a trigger lets an ``UPDATE`` only move it one link on."""

    chain = models.CharField(max_length=100, help_text="The chained model's label.")
    partition = models.BigIntegerField(help_text="The organisation's id.")
    seq = models.PositiveBigIntegerField(default=0)
    entry_hash = models.CharField(max_length=64, default=GENESIS)
    prev_hash = models.CharField(max_length=64, default=GENESIS, help_text="The hash before entry_hash.")
    unkeyed_until = models.PositiveBigIntegerField(
        default=0, help_text="Links up to this number are plain SHA-256 (written before the chain was keyed)."
    )
    seal = models.CharField(max_length=64, blank=True, help_text="HMAC of this row under AUDIT_CHAIN_KEY.")

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chain", "partition"], name="chain_head_once")]

    def __str__(self) -> str:
        return f"{self.chain} of {self.partition}: #{self.seq}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            refuse_change(type(self), "save of a stored head")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        refuse_change(type(self), "delete")


class OutboxMessage(models.Model):
    """A Celery task to send once the transaction that wrote this row has committed (a
    transactional outbox, :mod:`fimone.outbox`): written by the same statement as the change it
    follows up, so the change and its follow-up commit together or not at all, and the writing
    process pays one row instead of a broker round trip. ``outbox_relay`` sends it, at least once,
    and deletes it; the tasks sent this way are idempotent."""

    task = models.CharField(max_length=200, help_text="The Celery task's registered name.")
    args = models.JSONField(default=list, help_text="Its positional arguments.")
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "outbox message"

    def __str__(self) -> str:
        return f"{self.task} #{self.pk}"


class BudgetCounter(models.Model):
    """What a spending budget has used in one period (``fimone.budgets``), where no Redis is
    configured: ``key`` names the budget and the period; ``used`` is in millionths of the unit
    (the amounts' own currency)."""

    key = models.CharField(max_length=200, unique=True)
    used = models.BigIntegerField(default=0)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.used}"


class BudgetReservation(models.Model):
    """One call's amount counted in a budget (so a resumed call never counts twice, and a call
    that did not happen gives it back)."""

    counter = models.ForeignKey(BudgetCounter, on_delete=models.CASCADE, related_name="reservations")
    call = models.CharField(max_length=200)
    amount = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["counter", "call"], name="budget_one_reservation_per_call")
        ]

    def __str__(self) -> str:
        return f"{self.call}: {self.amount}"
