"""Reactions to other apps' signals."""

from __future__ import annotations

from typing import Any

from django.db.models import Model

from agents.history import PROTECTED_SAMPLE
from agents.models import Connector
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_cancel


def cancel_requests_of_run(sender: Any, *, run_id: int, reason: str | None = None, **kwargs: Any) -> None:
    """A cancelled run's pending requests are withdrawn, so nobody approves a dead call (a run that
    is still running and asked to stop too: one waiting inline would otherwise keep its request
    open until its window ends). ``reason``
    (why the run was cancelled, e.g. its agent was archived) is recorded with each withdrawal."""
    why = f"the run was cancelled: {reason}" if reason else "the run was cancelled"
    for request_id in ConfirmationRequest.objects.filter(
        run_id=run_id, status=ConfirmationStatus.PENDING
    ).values_list("pk", flat=True):
        confirmation_cancel(request_id=request_id, reason=why)


def requests_for_tools_of(connector: Connector) -> list[Model]:
    """Confirmation requests for the connector's tools (history even if the tool never ran:
    rejected, expired), so the connector cannot be deleted (``agents.history``)."""
    requests = ConfirmationRequest.objects.filter(
        organization_id=connector.organization_id, tool_name__startswith=connector.tool_prefix
    )
    return list(requests.order_by("created_at", "pk")[:PROTECTED_SAMPLE])


def approval_was_asked(run_id: int, tool_call_id: str) -> bool:
    """Whether a confirmation request exists for this call (the pipeline asks on re-entry)."""
    return ConfirmationRequest.objects.filter(run_id=run_id, tool_call_id=tool_call_id).exists()
