"""The project's own tables: the head of each tamper-evident audit chain (fimone/audit_chain.py)."""

from __future__ import annotations

from django.db import models

#: The previous hash of a chain's first link.
GENESIS = "0" * 64


class ChainHead(models.Model):
    """Where one partition of one audit chain ends: its last link's sequence number and hash.

    Appending a link updates this row (``UPDATE … RETURNING``), so the row is also the partition's
    lock: writers of one organisation's chain queue on it until their transaction ends, writers of
    other organisations (other rows) do not wait. ``seq`` 0 and :data:`GENESIS` for an empty chain.
    A cache of the chain's last row, kept in the same transaction; ``audit_verify`` checks it."""

    chain = models.CharField(max_length=100, help_text="The chained model's label.")
    partition = models.BigIntegerField(help_text="The organisation's id.")
    seq = models.PositiveBigIntegerField(default=0)
    entry_hash = models.CharField(max_length=64, default=GENESIS)
    prev_hash = models.CharField(max_length=64, default=GENESIS, help_text="The hash before entry_hash.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chain", "partition"], name="chain_head_once")]

    def __str__(self) -> str:
        return f"{self.chain} of {self.partition}: #{self.seq}"


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
