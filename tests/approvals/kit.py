"""Shared set-up for approval tests: a paying agent behind the gate, and a recorded executor."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.utils import timezone

from agents.engine.store import args_sha256
from agents.models import Agent, Conversation, Run
from agents.services import run_start
from approvals.models import ApproverPolicy, ConfirmationRequest
from tenancy.models import Membership, Role
from tests.agents.engine_kit import Harness, RecordingTool
from tests.personas import make_agent, scripted

PAY_SCHEMA = {
    "type": "object",
    "properties": {"purchase_id": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["purchase_id", "amount"],
}
PAY_ARGS = {"purchase_id": "PO-1001", "amount": 1250.5}


def pay_tool() -> RecordingTool:
    return RecordingTool(
        "oa__purchase_pay", result={"status": "paid"}, parameters=PAY_SCHEMA, requires_confirmation=True
    )


def paying_agent(personas: Any, *, hooks: list | None = None, **fields: Any) -> Agent:
    config = scripted(
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": dict(PAY_ARGS)}]},
        {"content": "Outcome: {last}"},
        hooks=hooks,
    )
    return make_agent(personas.org, personas.operator, model_config_json=config, **fields)


def make_approver(personas: Any, user: Any) -> None:
    """What an organisation admin does to let ``user`` (e.g. oscar, who owns and configures the
    paying agent) decide: give them the approver role (docs/design.md §1.13)."""
    Membership.objects.filter(organization=personas.org, user=user).update(role=Role.APPROVER)


def set_policy(personas: Any, *, agent: Agent | None = None, **fields: Any) -> ApproverPolicy:
    fields.setdefault("inline_wait_seconds", 0)
    return ApproverPolicy.objects.update_or_create(organization=personas.org, agent=agent, defaults=fields)[0]


class Resumes:
    """Records the resumes the services ask for instead of running them."""

    def __init__(self) -> None:
        self.run_ids: list[int] = []

    def __call__(self, run_id: int, *, reason: str) -> None:
        self.run_ids.append(run_id)


def suspended_run(
    personas: Any, harness: Harness, agent: Agent | None = None
) -> tuple[Run, ConfirmationRequest]:
    """Start a run that asks to pay and park it on its pending approval."""
    agent = agent or paying_agent(personas)
    run = run_start(agent=agent, user=personas.member, input="pay PO-1001")
    assert harness.execute(run) == "awaiting_approval"
    return run, ConfirmationRequest.objects.get(run=run)


def recorded_request(
    personas: Any,
    *,
    agent: Agent | None = None,
    requester: Any = None,
    approvers: list[Any] | None = None,
    tool_name: str = "oa__purchase_pay",
    tool_args: dict[str, Any] | None = None,
    status: str = "pending",
    decided_by: Any = None,
    decided_after: float | None = None,
    created_at: Any = None,
    channel: str = "web",
    hooks_bypassed: bool = False,
    reason: str = "",
) -> ConfirmationRequest:
    """A confirmation request written straight to the record (no engine): for the history,
    the export and the admin, which only read it."""
    agent = agent or make_agent(personas.org, personas.operator, name=f"Agent {uuid.uuid4().hex[:6]}")
    requester = requester or personas.member
    args = dict(PAY_ARGS) if tool_args is None else tool_args
    conversation = Conversation.objects.create(organization=agent.organization, agent=agent, user=requester)
    run = Run.objects.create(
        conversation=conversation, agent=agent, user=requester, input="pay", hooks_bypassed=hooks_bypassed
    )
    created = created_at or timezone.now()
    request = ConfirmationRequest.objects.create(
        organization=agent.organization,
        agent=agent,
        requested_by=requester,
        run=run,
        tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
        tool_name=tool_name,
        tool_args=args,
        args_sha256=args_sha256(args),
        status=status,
        channel=channel,
        expires_at=created + dt.timedelta(minutes=10),
        responded_by=decided_by,
        responded_at=created + dt.timedelta(seconds=decided_after) if decided_after is not None else None,
        reason=reason,
    )
    # ``created_at`` is auto_now_add: set the moment afterwards.
    ConfirmationRequest.objects.filter(pk=request.pk).update(created_at=created)
    request.refresh_from_db()
    request.approvers.set(approvers if approvers is not None else [personas.approver])
    return request


def policy_form(policy: ApproverPolicy, **changes: str) -> dict[str, str]:
    data = {
        "organization": str(policy.organization_id),
        "agent": "",
        "allow_org_approvers": "on",
        "allow_agent_owner": "on",
        "timeout_seconds": "600",
        "inline_wait_seconds": "20",
        "channel_config": "",
        "approvals_required": "1",
        "any_rejection_rejects": "on",
        "first_tier_may_decide_after_escalation": "on",
        "standing_grants": "off",
        "grant_max_hours": "8",
        "tiers-TOTAL_FORMS": "0",
        "tiers-INITIAL_FORMS": "0",
        "tiers-MIN_NUM_FORMS": "0",
        "tiers-MAX_NUM_FORMS": "1000",
        "stages-TOTAL_FORMS": "0",
        "stages-INITIAL_FORMS": "0",
        "stages-MIN_NUM_FORMS": "0",
        "stages-MAX_NUM_FORMS": "1000",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}
