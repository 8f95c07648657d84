"""Shared by the hook editor's tests (test_hook_editor.py, test_hook_trial.py, the history's): the
``payments`` agent fixture, a confirm_when declaration for big payments, and rows posted as the
editor posts them. A test module imports the fixture
as ``payments as payments``: the explicit re-export tells the linter the name is meant to be there."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Agent
from tests.admin_kit import logged_in, url
from tests.agents.run_kit import PAY_SCHEMA
from tests.console.admin_forms import agent_form, hook_rows
from tests.personas import make_action, make_agent, make_http_connector

CONFIRM_BIG_PAYMENTS = {
    "tools": "oa__purchase_pay",
    "conditions": [{"field": "amount", "op": ">=", "value": 50000}],
}


@pytest.fixture
def payments(governed) -> Agent:
    """The operator's agent with the demo's two payment tools; paying needs no approval by
    itself, so only the hooks decide."""
    connector = make_http_connector(governed.org, "http://127.0.0.1:9/")
    actions = [
        make_action(connector, "purchase_list", path="purchases", requires_confirmation=False),
        make_action(connector, "purchase_pay", method="POST", path="purchases/{purchase_id}/pay",
                    parameters_schema=PAY_SCHEMA, requires_confirmation=False),
    ]  # fmt: skip
    return make_agent(governed.org, governed.operator, actions=actions)


def condition_inputs(*rows: tuple[str, str, str]) -> dict[str, list[str]]:
    """A list of conditions as the condition editor posts it (``approvals.condition_rows``): its
    rows of field, operator and value, and one blank row."""
    rows = (*rows, ("", "==", ""))
    return {f"conditions-{part}": [row[i] for row in rows] for i, part in enumerate(("field", "op", "value"))}


def editor_row(hook: str, **inputs: Any) -> dict[str, Any]:
    """One row as the editor posts it: the hook picked and its parameter inputs."""
    row: dict[str, Any] = {"id": "", "hook": hook, "name": "", "kind": "class", "point": "", "matcher": "",
                           "priority": "", "timeout": "", "on_error": "", "mode": "enforce", "params": "{}",
                           "secret": ""}  # fmt: skip
    row.update({key: inputs.pop(key) for key in ("matcher", "priority") if key in inputs})
    if hook and not hook.startswith("own:"):
        row[f"params__{hook}___shown"] = "1"
        row.update({f"params__{hook}__{key}": value for key, value in inputs.items()})
    else:
        row.update(inputs)
    return row


def post_rows(user: Any, personas: Any, agent: Agent, *rows: dict[str, Any]):
    data = agent_form(personas, agent.model_config_json, name=agent.name, owner=agent.owner_id)
    data["actions"] = list(agent.actions.values_list("pk", flat=True))
    data.update(hook_rows(*rows))
    return logged_in(user).post(url(Agent, "change", agent.pk), data)
