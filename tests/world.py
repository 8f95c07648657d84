"""Fixtures shared by the admin tests (tests/console) and the engine's: one of everything in both
organisations (``world``), and no dispatch of new runs (``no_dispatch``; not autouse: the modules
that want it ask with ``pytestmark = pytest.mark.usefixtures("no_dispatch")``)."""

from __future__ import annotations

from typing import Any

import pytest

from agents import events as ev
from agents.models import RunEvent, ToolExecution
from agents.services import run_start
from tests.personas import make_action, make_agent, make_http_connector, scripted

SECRET = "s3cr3t-bearer-VALUE-42"


@pytest.fixture
def no_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)


@pytest.fixture
def world(personas) -> dict[str, Any]:
    """One of everything, in both organisations."""
    connector = make_http_connector(
        personas.org, "https://oa.example.test", secrets={"headers": {"Authorization": f"Bearer {SECRET}"}}
    )
    action = make_action(connector, "purchase_pay", method="POST", path="/purchases/{purchase_id}/pay")
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted({"content": "Hello."}, hooks=[{"name": "truncate_result", "params": {}}]),
        actions=[action],
    )
    run = run_start(agent=agent, user=personas.member, input="pay PO-1")
    RunEvent.objects.create(run=run, seq=1, type=ev.RUN_STARTED, payload={"agent_id": agent.pk})
    RunEvent.objects.create(run=run, seq=2, type=ev.LLM_MESSAGE, payload={"content": "Paying."})
    execution = ToolExecution.objects.create(
        run=run,
        tool_call_id="call-1",
        tool_name=action.tool_name,
        args={"purchase_id": "PO-1"},
        args_sha256="0" * 64,
    )
    globex_agent = make_agent(personas.other_org, personas.stranger, name="Globex secret agent")
    return {
        "connector": connector,
        "action": action,
        "agent": agent,
        "run": run,
        "conversation": run.conversation,
        "execution": execution,
        "globex_agent": globex_agent,
    }
