"""The fields and the append-only behaviour every chained model shares (:class:`ChainLink`)."""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

from django.db import models

from fimone.models import AppendOnlyQuerySet, refuse_change


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
