"""Demo target service — not part of the platform: paying purchases and seeding the demo data."""

from __future__ import annotations

import datetime as dt
import re
import secrets
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
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


class InvalidPurchase(PaymentError):
    code = "bad_request"


MAX_AMOUNT = Decimal("9999999999.99")
"""The largest amount a purchase holds (twelve digits, two of them decimals)."""
_NUMBERED_RE = re.compile(r"^PO-(\d+)$")


@transaction.atomic
def purchase_create(
    *, vendor: str, amount: Decimal, description: str = "", currency: str = "USD"
) -> Purchase:
    """A new pending purchase, numbered after the highest ``PO-<n>`` ("PO-1004" after the seed).

    Raises :class:`InvalidPurchase` when the vendor is empty, the amount not positive, above
    :data:`MAX_AMOUNT` or finer than a cent, or the currency not three letters. Two purchases
    created at once cannot take the same number: the second tries the next one.
    """
    vendor, description, currency = vendor.strip(), description.strip(), currency.strip().upper()
    if not vendor or len(vendor) > 200:
        raise InvalidPurchase("vendor must be a name of 1 to 200 characters")
    if (
        not amount.is_finite()
        or amount <= 0
        or amount > MAX_AMOUNT
        or amount != amount.quantize(Decimal("0.01"))
    ):
        raise InvalidPurchase(
            f"amount must be a positive number of at most {MAX_AMOUNT:,} with cents at most"
        )
    if not re.fullmatch(r"[A-Z]{3}", currency):
        raise InvalidPurchase('currency must be a three-letter code such as "USD"')
    if len(description) > 1000:
        raise InvalidPurchase("description must be at most 1,000 characters")
    numbers = [
        int(m.group(1))
        for pk in Purchase.objects.values_list("id", flat=True)
        if (m := _NUMBERED_RE.match(pk))
    ]
    number = max(numbers, default=1000) + 1
    for attempt in range(5):
        try:
            with transaction.atomic():  # a savepoint: a number taken meanwhile leaves the rest intact
                return Purchase.objects.create(
                    id=f"PO-{number + attempt}",
                    vendor=vendor,
                    description=description,
                    amount=amount,
                    currency=currency,
                )
        except IntegrityError:
            continue
    raise InvalidPurchase("too many purchases are being created at once; try again")


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
    """Create the demo purchases, or put them back in their seeded state, and remove purchases
    created since. Idempotent: re-running it (every ``make run``) gives a fresh demo with the same
    two purchases pending."""
    Purchase.objects.exclude(id__in=[entry["id"] for entry in DEMO_PURCHASES]).delete()
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
