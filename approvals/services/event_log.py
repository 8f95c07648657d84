"""The request's event log: every attempt on a request, accepted or refused, is appended here
(docs/design.md §1.4, §1.8), as a link of its organisation's hash chain (:mod:`fimone.audit_chain`).

The lowest of the services: every other lifecycle step logs through :func:`log_event`, and this
module imports none of them.
"""

from __future__ import annotations

import uuid
from typing import Any

from approvals.models import ConfirmationEvent, ConfirmationRequest
from fimone.audit_chain import chain_append

Kind = ConfirmationEvent.Kind


def log_event(
    *,
    request_id: uuid.UUID,
    kind: str,
    actor: Any = None,
    external_id: str = "",
    organization_id: int | None = None,
    **details: Any,
) -> ConfirmationEvent:
    """Append an event to the request's history, as the next link of its organisation's hash
    chain (``fimone.audit_chain``), in the caller's transaction: the organisation's chain stays
    locked until that transaction ends, so log last in long transactions.
    ``organization_id``: the request's, when the caller has it loaded (saves reading it)."""
    if organization_id is None:
        organization_id = (
            ConfirmationRequest.objects.filter(pk=request_id).values_list("organization_id", flat=True).get()
        )
    return chain_append(
        ConfirmationEvent(
            organization_id=organization_id,
            request_id=request_id,
            kind=kind,
            actor=actor if getattr(actor, "pk", None) else None,
            actor_external_id=external_id,
            details=details,
        )
    )


def confirmation_log_executed(*, request_id: uuid.UUID, tool_status: str) -> None:
    """Log that the approved call ran, and how it ended (``tool_status``), on its request."""
    log_event(request_id=request_id, kind=Kind.EXECUTED, tool_status=tool_status)
