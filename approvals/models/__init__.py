"""Confirmation requests, their append-only event log, and approver policies (docs/design.md §5).

One module per concern: ``channel_configs`` (where cards go), ``policies`` (policies, stages,
escalation tiers), ``delegation`` (absences and standing approvals), ``requests`` (requests, the
people asked, votes, events).
"""

from approvals.models.channel_configs import ChannelConfig, ChannelKind, new_callback_key
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
    "ChannelConfig",
    "ChannelKind",
    "ConfirmationApprover",
    "ConfirmationEvent",
    "ConfirmationRequest",
    "ConfirmationStatus",
    "ConfirmationVote",
    "EscalationTier",
    "StandingGrant",
    "new_callback_key",
]
