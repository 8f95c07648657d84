"""Withdrawing a request whose run was cancelled (``approvals.receivers``), so that nobody
approves a dead call.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.live import SETTLED, inbox_changed
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.services.event_log import Kind, log_event
from approvals.services.settling import announce_settled
from approvals.waking import wake


@transaction.atomic
def confirmation_cancel(*, request_id: uuid.UUID, reason: str, actor: Any = None) -> bool:
    """Withdraw a pending request (its run was cancelled). ``False`` if it was already final."""
    now = timezone.now()
    won = ConfirmationRequest.objects.filter(pk=request_id, status=ConfirmationStatus.PENDING).update(
        status=ConfirmationStatus.CANCELLED, responded_at=now, reason=reason
    )
    if won:
        request = ConfirmationRequest.objects.get(pk=request_id)
        log_event(
            request_id=request_id,
            kind=Kind.CANCELLED,
            actor=actor,
            reason=reason,
            verdict=request.verdict_record(),
        )
        transaction.on_commit(
            lambda: (
                wake(request_id),
                announce_settled(request_id=request.pk, channel=request.channel, status=request.status),
                inbox_changed(request_id=request_id, change=SETTLED),
            )
        )
    return bool(won)
