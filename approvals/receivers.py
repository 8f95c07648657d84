"""Reactions to other apps' signals."""

from __future__ import annotations

from typing import Any

from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_cancel


def cancel_requests_of_run(sender: Any, *, run_id: int, **kwargs: Any) -> None:
    """A cancelled run's pending requests are withdrawn, so nobody approves a dead call."""
    for request_id in ConfirmationRequest.objects.filter(
        run_id=run_id, status=ConfirmationStatus.PENDING
    ).values_list("pk", flat=True):
        confirmation_cancel(request_id=request_id, reason="the run was cancelled")
