"""Reads of confirmation requests."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from approvals.models import ConfirmationRequest, ConfirmationStatus


def request_status(*, request_id: uuid.UUID) -> str:
    return ConfirmationRequest.objects.filter(pk=request_id).values_list("status", flat=True).get()


def request_for_call(*, run_id: int, tool_call_id: str) -> ConfirmationRequest | None:
    return (
        ConfirmationRequest.objects.select_related("responded_by")
        .filter(run_id=run_id, tool_call_id=tool_call_id)
        .first()
    )


def inbox_for(*, user: Any) -> QuerySet[ConfirmationRequest]:
    """Pending, unexpired requests ``user`` may decide, soonest deadline first."""
    return (
        ConfirmationRequest.objects.filter(
            approvers=user, status=ConfirmationStatus.PENDING, expires_at__gt=timezone.now()
        )
        .select_related("agent", "requested_by", "run", "run__conversation")
        .order_by("expires_at")
    )


def display_name(user: Any) -> str:
    if user is None:
        return "nobody"
    full = user.get_full_name() if hasattr(user, "get_full_name") else ""
    return full or user.get_username()
