"""Demo target service — not part of the platform: the purchases the demo agent pays."""

from __future__ import annotations

from django.db import models


class Purchase(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        PAID = "paid", "Paid"

    id = models.CharField(primary_key=True, max_length=20, help_text='e.g. "PO-1001"')
    vendor = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    amount = models.DecimalField(max_digits=12, decimal_places=2)
    currency = models.CharField(max_length=3, default="USD")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING, db_index=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    paid_reference = models.CharField(max_length=40, blank=True)
    paid_note = models.CharField(max_length=500, blank=True, help_text="The payer's note, if any.")

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.id} {self.vendor} {self.amount} {self.currency} ({self.status})"
