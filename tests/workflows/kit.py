"""Shared set-up for workflow tests: one-step workflows on either path, and a driver that runs
each node's run in-process (as a worker would) until the walk stops."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Run, RunStatus
from tests.agents.engine_kit import Harness
from tests.approvals.kit import PAY_ARGS, PAY_SCHEMA, paying_agent
from tests.personas import make_action, make_agent, make_http_connector
from workflows.models import Workflow, WorkflowNodeRun, WorkflowRun
from workflows.services import workflow_run_start

AGENT, CONNECTOR = "agent", "connector"


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Runs handed to the executor are recorded, not run: the test drives them (``drive``)."""
    started: list[int] = []
    monkeypatch.setattr("agents.services.dispatch_execute", started.append)
    monkeypatch.setattr("agents.executors.dispatch_execute", started.append)
    monkeypatch.setattr("agents.executors.dispatch_resume", lambda run_id, *, reason: None)
    return started


def pay_action(personas: Any, base_url: str = "http://127.0.0.1:9/api/") -> Any:
    connector = make_http_connector(personas.org, base_url, slug="oa")
    return make_action(
        connector,
        "purchase_pay",
        method="POST",
        path="purchases/{purchase_id}/pay",
        parameters_schema=PAY_SCHEMA,
    )


def one_step_graph(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodes": [{"id": "start", "type": "start"}, {"id": "step", **step}, {"id": "end", "type": "end"}],
        "edges": [{"from": "start", "to": "step"}, {"from": "step", "to": "end"}],
    }


def one_step_workflow(personas: Any, path: str, *, hooks: list[Any] | None = None, **fields: Any) -> Workflow:
    """A workflow whose one step pays PO-1001: an AGENT node (a paying agent declaring ``hooks``)
    or a CONNECTOR node (the OA payment action, the workflow declaring ``hooks``)."""
    if path == AGENT:
        agent = paying_agent(personas, hooks=hooks)
        graph = one_step_graph({"type": "agent", "agent": agent.pk, "input": "Pay {{ input }}"})
        workflow_hooks: list[Any] = []
    else:
        action = pay_action(personas)
        arguments = {"purchase_id": "{{ input }}", "amount": PAY_ARGS["amount"]}
        graph = one_step_graph({"type": "connector", "action": action.pk, "arguments": arguments})
        fields.setdefault(
            "connector_agent", make_agent(personas.org, personas.operator, name="Workflow desk")
        )
        workflow_hooks = hooks or []
    workflow = Workflow(
        organization=personas.org, name="Pay a purchase", graph=graph, hooks=workflow_hooks, **fields
    )
    workflow.full_clean()
    workflow.save()
    return workflow


def start(personas: Any, workflow: Workflow, input: str = "PO-1001") -> WorkflowRun:
    return workflow_run_start(workflow=workflow, user=personas.member, input=input)


def node(workflow_run: WorkflowRun, node_id: str = "step") -> WorkflowNodeRun:
    return WorkflowNodeRun.objects.select_related("run").get(workflow_run=workflow_run, node_id=node_id)


def drive(harness: Harness, workflow_run: WorkflowRun) -> WorkflowRun:
    """Execute every queued node run (each ending advances the walk), then the workflow run as
    it stands."""
    while True:
        queued = Run.objects.filter(workflow_node__workflow_run=workflow_run, status=RunStatus.QUEUED).first()
        if queued is None:
            break
        harness.execute(queued)
    workflow_run.refresh_from_db()
    return workflow_run
