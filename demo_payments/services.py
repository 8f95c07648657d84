"""Demo target service — not part of the platform: paying purchases and seeding the demo data."""

from __future__ import annotations

import datetime as dt
import secrets
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from demo_payments.models import Purchase


class PaymentError(Exception):
    """A payment the service refuses. ``code`` is machine-readable, ``str()`` explains it."""

    code = "payment_refused"


class PurchaseNotFound(PaymentError):
    code = "not_found"


class PurchaseAlreadyPaid(PaymentError):
    code = "already_paid"


class AmountMismatch(PaymentError):
    code = "amount_mismatch"

    def __init__(self, message: str, *, expected: Decimal) -> None:
        super().__init__(message)
        self.expected = expected


@transaction.atomic
def purchase_pay(*, purchase_id: str, amount: Decimal, note: str = "") -> Purchase:
    """Mark a pending purchase paid when ``amount`` equals its amount exactly.

    Raises :class:`PurchaseNotFound`, :class:`PurchaseAlreadyPaid` (checked before the amount, so
    a retry of a payment that went through is told so) or :class:`AmountMismatch`. The row is
    locked for the check-and-update so two concurrent payments cannot both succeed.
    """
    purchase = Purchase.objects.select_for_update().filter(pk=purchase_id).first()
    if purchase is None:
        raise PurchaseNotFound(f"no purchase {purchase_id!r}")
    if purchase.status == Purchase.Status.PAID:
        raise PurchaseAlreadyPaid(f"{purchase.id} was already paid ({purchase.paid_reference})")
    if amount != purchase.amount:
        raise AmountMismatch(
            f"amount {amount} does not match the amount of {purchase.id}: "
            f"{purchase.amount} {purchase.currency}",
            expected=purchase.amount,
        )
    purchase.status = Purchase.Status.PAID
    purchase.paid_at = timezone.now()
    purchase.paid_reference = f"PAY-{secrets.token_hex(4).upper()}"
    purchase.paid_note = note[:500]
    purchase.save(update_fields=["status", "paid_at", "paid_reference", "paid_note"])
    return purchase


DEMO_PURCHASES: list[dict[str, Any]] = [
    {
        "id": "PO-1001",
        "vendor": "Lumen Office Supplies",
        "description": "200 reams of A4 paper and 12 toner cartridges",
        "amount": Decimal("1200.00"),
    },
    {
        "id": "PO-1002",
        "vendor": "Northwind Cloud",
        "description": "Annual hosting renewal",
        "amount": Decimal("4800.00"),
    },
    {
        "id": "PO-1003",
        "vendor": "Bolt Couriers",
        "description": "Courier services, March",
        "amount": Decimal("350.50"),
        "status": Purchase.Status.PAID,
        "paid_at": dt.datetime(2026, 3, 31, 9, 30, tzinfo=dt.UTC),
        "paid_reference": "PAY-SEED1003",
    },
]


@transaction.atomic
def purchase_seed_demo() -> list[Purchase]:
    """Create the demo purchases, or put them back in their seeded state. Idempotent: re-running
    it (every ``make run``) gives a fresh demo with the same two purchases pending."""
    seeded = []
    for entry in DEMO_PURCHASES:
        fields = {
            "currency": "USD",
            "status": Purchase.Status.PENDING,
            "paid_at": None,
            "paid_reference": "",
            "paid_note": "",
            **{key: value for key, value in entry.items() if key != "id"},
        }
        purchase, _ = Purchase.objects.update_or_create(id=entry["id"], defaults=fields)
        seeded.append(purchase)
    return seeded
