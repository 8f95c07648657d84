"""Shared set-up for approval tests: a paying agent behind the gate, and a recorded executor."""

from __future__ import annotations

from typing import Any

from agents.models import Agent, Run
from agents.services import run_start
from approvals.models import ApproverPolicy, ConfirmationRequest
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
