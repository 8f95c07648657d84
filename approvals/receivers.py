"""Reactions to other apps' signals."""

from __future__ import annotations

from typing import Any

from django.db.models import ProtectedError

from agents.models import Connector
from agents.receivers import PROTECTED_SAMPLE
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_cancel


def cancel_requests_of_run(sender: Any, *, run_id: int, reason: str | None = None, **kwargs: Any) -> None:
    """A cancelled run's pending requests are withdrawn, so nobody approves a dead call. ``reason``
    (why the run was cancelled, e.g. its agent was archived) is recorded with each withdrawal."""
    why = f"the run was cancelled: {reason}" if reason else "the run was cancelled"
    for request_id in ConfirmationRequest.objects.filter(
        run_id=run_id, status=ConfirmationStatus.PENDING
    ).values_list("pk", flat=True):
        confirmation_cancel(request_id=request_id, reason=why)


def protect_connector_requests(sender: Any, *, instance: Connector, **kwargs: Any) -> None:
    """Refuse to delete a connector one of whose tools was put to an approver (DESIGN §1.9), even
    if it never ran (rejected, expired): requests name their tool, not the connector."""
    requests = ConfirmationRequest.objects.filter(
        organization_id=instance.organization_id, tool_name__startswith=instance.tool_prefix
    )
    sample = list(requests.order_by("created_at", "pk")[:PROTECTED_SAMPLE])
    if sample:
        raise ProtectedError(
            f"Cannot delete the connector {instance}: approvals were requested for its tools, and "
            "that history is kept. Archive it instead.",
            set(sample),
        )
