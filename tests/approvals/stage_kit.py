"""A two-stage policy as organisations write it: "from 50,000 on, the requester's team lead, then
finance (2 of 3)". alice requests; lee is her manager; finn, fiona and fred are finance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.models import Agent, Run
from agents.services import run_start
from approvals.models import ApprovalStage, ApproverPolicy, ConfirmationRequest
from tenancy.models import Membership, Role
from tests.agents.engine_kit import Harness
from tests.approvals.kit import pay_tool, set_policy
from tests.personas import make_agent, make_user, scripted

LARGE = {"field": "amount", "op": ">=", "value": 50000}


@dataclass
class Finance:
    lee: Any
    finn: Any
    fiona: Any
    fred: Any
    policy: ApproverPolicy
    lead: ApprovalStage
    finance: ApprovalStage


def two_stage_policy(personas: Any, *, finance_required: int = 2, **policy: Any) -> Finance:
    """The organisation's default policy with the two stages, both for calls of 50,000 or more."""
    org = personas.org
    lee = make_user("lee", org, Role.APPROVER)
    finn = make_user("finn", org, Role.APPROVER)
    fiona = make_user("fiona", org, Role.APPROVER)
    fred = make_user("fred", org, Role.APPROVER)
    Membership.objects.filter(organization=org, user=personas.member).update(manager=lee)
    row = set_policy(personas, **policy)
    lead = ApprovalStage.objects.create(
        policy=row, position=1, name="Team lead", conditions=[LARGE], requester_manager=True
    )
    finance = ApprovalStage.objects.create(
        policy=row, position=2, name="Finance", conditions=[LARGE], approvals_required=finance_required
    )
    finance.named_users.set([finn, fiona, fred])
    return Finance(lee, finn, fiona, fred, row, lead, finance)


def paying(personas: Any, amount: float) -> Agent:
    config = scripted(
        {
            "tool_calls": [
                {"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-7", "amount": amount}}
            ]
        },
        {"content": "Outcome: {last}"},
    )
    return make_agent(personas.org, personas.operator, name=f"Payer {amount}", model_config_json=config)


def parked_payment(personas: Any, harness: Harness, amount: float) -> tuple[Run, ConfirmationRequest]:
    """alice asks to pay ``amount``; the run parks on its approval."""
    run = run_start(agent=paying(personas, amount), user=personas.member, input=f"pay {amount}")
    assert harness.execute(run) == "awaiting_approval"
    return run, ConfirmationRequest.objects.get(run=run)


__all__ = ["Finance", "parked_payment", "pay_tool", "paying", "two_stage_policy"]
