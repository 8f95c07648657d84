"""Demo target service — not part of the platform: reading purchases."""

from __future__ import annotations

from django.db.models import QuerySet

from demo_payments.models import Purchase


def purchase_list(*, status: str | None = None) -> QuerySet[Purchase]:
    """Purchases ordered by id, only those of ``status`` when given (an unknown status: none)."""
    purchases = Purchase.objects.all()
    if status is not None:
        purchases = purchases.filter(status=status)
    return purchases.order_by("id")


def purchase_get(*, purchase_id: str) -> Purchase | None:
    return Purchase.objects.filter(pk=purchase_id).first()
