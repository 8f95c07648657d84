"""The approvals part of the demo (``agents.demo``): the organisation's default approver policy,
with the seed's two stages for calls of 50,000 or more: alice's team lead, then finance (2 of 3)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from approvals.models import ApprovalStage, ApproverPolicy
from tenancy.models import Organization

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


LARGE_CALL = [{"field": "amount", "op": ">=", "value": 50_000}]
"""When the demo's stages apply: any call with an amount of 50,000 or more."""

DEMO_STAGES: list[dict[str, Any]] = [
    {"name": "Team lead", "conditions": LARGE_CALL, "requester_manager": True, "approvals_required": 1},
    {
        "name": "Finance",
        "conditions": LARGE_CALL,
        "named": ["april", "fiona", "adam"],
        "approvals_required": 2,
    },
]
"""From 50,000 on: the requester's manager (lee, for alice), then two of april, fiona and adam."""


def demo_policy_seed(sender: Any, *, organization: Organization, **kwargs: Any) -> str:
    """Receiver of ``agents.demo.demo_seeded``: the demo organisation's default policy, put back
    as :data:`DEMO_POLICY` says (named users and escalation tiers an operator added are removed)."""
    policy, _ = ApproverPolicy.objects.update_or_create(
        organization=organization, agent=None, defaults=DEMO_POLICY
    )
    policy.named_users.clear()
    policy.tiers.all().delete()
    policy.stages.all().delete()
    users = get_user_model().objects
    for position, fields in enumerate(DEMO_STAGES, start=1):
        fields = dict(fields)
        named = fields.pop("named", [])
        stage = ApprovalStage.objects.create(policy=policy, position=position, **fields)
        stage.named_users.set(users.filter(username__in=named))
    minutes = DEMO_POLICY["timeout_seconds"] // 60
    return (
        f"Approver policy: approvers and admins decide, within {minutes} minutes; from 50,000 on, "
        "alice's team lead (lee) first, then two of finance (april, fiona, adam)."
    )
