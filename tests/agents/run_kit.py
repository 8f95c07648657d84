"""Shared by the engine's tests (test_engine_*.py): the payment tool's schema, an agent scripted
to pay with it, and a run of an agent started by the member."""

from __future__ import annotations

from agents.models import Run
from agents.services import run_start
from tests.personas import make_agent, scripted

PAY_SCHEMA = {
    "type": "object",
    "properties": {"purchase_id": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["purchase_id", "amount"],
}


def start(personas, agent, text="pay PO-1") -> Run:
    return run_start(agent=agent, user=personas.member, input=text)


def pay_agent(personas, *turns, hooks=None, **fields):
    if not turns:
        turns = (
            {
                "tool_calls": [
                    {"name": "oa__purchase_pay", "arguments": {"purchase_id": "PO-1", "amount": 5000}}
                ]
            },
            {"content": "Result: {last}"},
        )
    return make_agent(
        personas.org, personas.operator, model_config_json=scripted(*turns, hooks=hooks), **fields
    )
