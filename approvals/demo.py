"""The approvals part of the demo (``agents.demo``): the organisation's default approver policy."""

from __future__ import annotations

from typing import Any

from agents.models import Organization
from approvals.models import ApproverPolicy

DEMO_POLICY: dict[str, Any] = {
    "allow_initiator": False,
    "allow_agent_owner": False,
    "allow_org_approvers": True,
    "allow_self_approval": False,
    "timeout_seconds": 600,
    "inline_wait_seconds": 20,
    "approvals_required": 1,
    "any_rejection_rejects": True,
    "allow_edit_on_approve": False,
    "channel_config": None,
}
"""Approvers and admins decide (one approval), within ten minutes; nobody approves their own call."""


def demo_policy_seed(sender: Any, *, organization: Organization, **kwargs: Any) -> str:
    """Receiver of ``agents.demo.demo_seeded``: the demo organisation's default policy, put back
    as :data:`DEMO_POLICY` says (named users and escalation tiers an operator added are removed)."""
    policy, _ = ApproverPolicy.objects.update_or_create(
        organization=organization, agent=None, defaults=DEMO_POLICY
    )
    policy.named_users.clear()
    policy.tiers.all().delete()
    minutes = DEMO_POLICY["timeout_seconds"] // 60
    return f"Approver policy: approvers and admins decide, within {minutes} minutes."
