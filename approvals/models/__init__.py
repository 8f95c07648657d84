"""Confirmation requests, their append-only event log, and approver policies (docs/design.md §5).

One module per concern: ``policies`` (policies, stages, escalation tiers), ``delegation``
(absences and standing approvals), ``requests`` (requests, the people asked, votes, events).
"""

from approvals.models.delegation import Absence, StandingGrant
from approvals.models.policies import ApprovalStage, ApproverPolicy, EscalationTier
from approvals.models.requests import (
    VERDICT_EVENT_KIND,
    ConfirmationApprover,
    ConfirmationEvent,
    ConfirmationRequest,
    ConfirmationStatus,
    ConfirmationVote,
)

__all__ = [
    "VERDICT_EVENT_KIND",
    "Absence",
    "ApprovalStage",
    "ApproverPolicy",
    "ConfirmationApprover",
    "ConfirmationEvent",
    "ConfirmationRequest",
    "ConfirmationStatus",
    "ConfirmationVote",
    "EscalationTier",
    "StandingGrant",
]
