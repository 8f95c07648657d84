"""The rows of the every-path test (tests/test_every_path.py) and how it drives them: each
:class:`Path` says how a user's request reaches a tool call on one execution path.

Adding a path is adding a row to :data:`PATHS`: a :class:`Path` whose ``start`` builds what the
path needs around the hook declarations it is given and returns the root (the run, or the
workflow run, the user started); ``tool_run`` names the run whose tool calls the hooks guard. The
root's ``status``, ``output`` and ``error`` read the same for a run and a workflow run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agents.models import Agent, ExecutionPath, Run
from hooks import HookContext, HookResult, PostToolUseHook
from hooks.catalog import HookDeclarationError, parse_declaration, register_hook, resolve_chain
from mcp_gateway.models import Gateway
from mcp_gateway.services import gateway_call_start
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.kit import PAY_SCHEMA
from tests.personas import make_agent, scripted
from tests.workflows.kit import drive as drive_workflow
from tests.workflows.kit import node, one_step_graph, pay_action
from workflows.models import Workflow, WorkflowRun
from workflows.services import workflow_run_start

Root = Run | WorkflowRun

PAY_ARGS = {"purchase_id": "PO-1", "amount": 5000}
PAY_TURNS = (
    {"tool_calls": [{"name": "oa__purchase_pay", "arguments": PAY_ARGS}]},
    {"content": "Result: {last}"},
)


def paying_config(hooks: list[Any] | None) -> dict[str, Any]:
    return scripted(*PAY_TURNS, hooks=hooks)


def paying_agent(personas, hooks: list[Any] | None, **fields: Any) -> Agent:
    return make_agent(personas.org, personas.operator, model_config_json=paying_config(hooks), **fields)


# --- the rows ---------------------------------------------------------------------------------------


def execute_run(harness: Harness, root: Run) -> None:
    harness.execute(root)


def walk_workflow(harness: Harness, root: WorkflowRun) -> None:
    drive_workflow(harness, root)


@dataclass(frozen=True)
class Path:
    name: str
    start: Callable[[Any, list[Any] | None], Root]
    """Build what the path needs (the tool-calling agent, or the workflow of a CONNECTOR node,
    declares ``hooks``) and start the root."""
    tool_run: Callable[[Root], Run | None]
    """The run whose tool calls the hooks guard (``None``: it was never created)."""
    execution_path: str
    drive: Callable[[Harness, Any], None] = execute_run
    """Run the root in-process (as a worker would) until it ends or parks."""
    has_model: bool = True
    """A model hears a blocked call and answers; without one (a CONNECTOR node, a gateway call)
    the path fails, naming the refusal."""
    chain_owner: str = "agent"
    """Whose hooks the run keeps: a CONNECTOR node runs its workflow's."""


def via_rest_api(personas, hooks) -> Run:
    agent = paying_agent(personas, hooks)
    client = APIClient()
    client.force_authenticate(personas.member)
    response = client.post(f"/api/agents/{agent.pk}/runs/", {"input": "pay PO-1"}, format="json")
    assert response.status_code == 201, response.content
    return Run.objects.get(pk=response.json()["id"])


def via_portal(personas, hooks) -> Run:
    agent = paying_agent(personas, hooks)
    client = Client()
    client.force_login(personas.member)
    response = client.post(reverse("portal:agent", args=[agent.pk]), {"message": "pay PO-1"})
    assert response.status_code == 302, response.content
    return Run.objects.get(agent=agent)


def dag_agent(personas, hooks) -> Agent:
    """A DAG agent whose one step pays."""
    plan = {"steps": [{"id": "pay", "task": "pay the purchase order", "depends_on": []}]}
    config = {
        "provider": "scripted",
        "script": {
            "rules": [
                {"match": "^Plan this task", "turns": [{"content": json.dumps(plan)}]},
                {"match": "^Synthesise", "turns": [{"content": "Synthesised: {last}"}]},
                {"turns": list(PAY_TURNS)},
            ]
        },
    }
    if hooks is not None:
        config["hooks"] = {"class_hooks": hooks}
    return make_agent(personas.org, personas.operator, engine="dag", model_config_json=config)


def via_dag_step(personas, hooks) -> Run:
    from agents.services import run_start

    agent = dag_agent(personas, hooks)
    return run_start(agent=agent, user=personas.member, input="pay PO-1", execution_path=ExecutionPath.API)


def delegating_agent(personas, hooks) -> Agent:
    """An agent that asks "Ledger clerk" (who declares ``hooks`` and pays) to pay."""
    delegate = paying_agent(personas, hooks, name="Ledger clerk")
    call = {"name": "call_agent", "arguments": {"agent": "Ledger clerk", "input": "pay PO-1"}}
    caller = make_agent(
        personas.org,
        personas.operator,
        name="Assistant",
        model_config_json=scripted({"tool_calls": [call]}, {"content": "Delegate said: {last}"}),
    )
    caller.delegates.set([delegate])
    return caller


def via_delegate(personas, hooks) -> Run:
    from agents.services import run_start

    caller = delegating_agent(personas, hooks)
    return run_start(agent=caller, user=personas.member, input="pay PO-1", execution_path=ExecutionPath.API)


def the_child(run: Run) -> Run | None:
    return run.children.first()


def workflow_of(personas, step: dict[str, Any], *, hooks: list[Any], **fields: Any) -> WorkflowRun:
    """Save a START → ``step`` → END workflow (as declared: no check, as ``make_agent`` saves an
    agent) and start it for the member."""
    workflow = Workflow.objects.create(
        organization=personas.org, name="Pay a purchase", graph=one_step_graph(step), hooks=hooks, **fields
    )
    return workflow_run_start(workflow=workflow, user=personas.member, input="PO-1")


def via_workflow_agent_node(personas, hooks) -> WorkflowRun:
    agent = paying_agent(personas, hooks)
    return workflow_of(personas, {"type": "agent", "agent": agent.pk, "input": "pay {{ input }}"}, hooks=[])


def via_workflow_connector_node(personas, hooks) -> WorkflowRun:
    """The workflow declares ``hooks``; its CONNECTOR node calls the payment action, no LLM.

    A workflow whose hooks cannot be built does not start at all (tests/workflows proves that
    refusal). Such a chain still reaches a CONNECTOR node when a hook leaves the catalog after
    the workflow run began: that is what this row plays for a declaration the catalog cannot
    build — the run starts without it, then its recorded chain names it."""
    try:
        chain = resolve_chain(hooks or [])
    except HookDeclarationError:
        chain = None
    step = {
        "type": "connector",
        "action": pay_action(personas).pk,
        "arguments": {"purchase_id": "{{ input }}", "amount": PAY_ARGS["amount"]},
    }
    desk = make_agent(personas.org, personas.operator, name="Workflow desk")
    workflow_run = workflow_of(
        personas, step, hooks=(hooks or []) if chain is not None else [], connector_agent=desk
    )
    if chain is None:
        retired = [
            {"kind": "class", "name": name, "point": "PreToolUse", "matcher": "", "params": {},
             "priority": 10, "timeout": 5, "on_error": "block", "source": "agent"}
            for name, _params in parse_declaration(hooks)
        ]  # fmt: skip
        recorded = {**workflow_run.hook_chain, "declared": retired}
        WorkflowRun.objects.filter(pk=workflow_run.pk).update(hook_chain=recorded)
        Run.objects.filter(pk=node(workflow_run).run_id).update(hook_chain=recorded)
    return workflow_run


def the_node_run(workflow_run: WorkflowRun) -> Run | None:
    return node(workflow_run).run


def via_mcp_gateway(personas, hooks) -> Run:
    """An MCP client calls the paying tool through a gateway to the agent that declares ``hooks``.

    The call starts as the gateway's request handler starts it (``gateway_call_start``); the
    row's drive plays the handler's own driving of the run. The wire itself (the SDK's client, the
    token, progress notifications) is tests/mcp_gateway's."""
    agent = paying_agent(personas, hooks)
    gateway = Gateway.objects.create(organization=personas.org, agent=agent, name="Desk")
    call, fresh = gateway_call_start(
        gateway=gateway, user=personas.member, tool_name="oa__purchase_pay", arguments=dict(PAY_ARGS)
    )
    assert fresh
    return call.run


PATHS: list[Path] = [
    Path("rest-api", via_rest_api, lambda run: run, ExecutionPath.API),
    Path("portal", via_portal, lambda run: run, ExecutionPath.PORTAL),
    Path("dag-step", via_dag_step, the_child, ExecutionPath.DAG),
    Path("delegated-agent", via_delegate, the_child, ExecutionPath.DELEGATE),
    Path("workflow-agent-node", via_workflow_agent_node, the_node_run, ExecutionPath.WORKFLOW, walk_workflow),
    Path(
        "workflow-connector-node",
        via_workflow_connector_node,
        the_node_run,
        ExecutionPath.WORKFLOW,
        walk_workflow,
        has_model=False,
        chain_owner="workflow",
    ),
    Path("mcp-gateway", via_mcp_gateway, lambda run: run, ExecutionPath.MCP, has_model=False),
]


# --- driving ----------------------------------------------------------------------------------------


def drive(path: Path, personas, hooks, tool: RecordingTool) -> tuple[Root, Run | None]:
    """Start the path and drive it until it ends or parks; return the root and the tool run."""
    root = path.start(personas, hooks)
    if isinstance(root, Run):  # the run the user started, not one a path made inside it
        assert root.execution_path in (ExecutionPath.API, ExecutionPath.PORTAL, ExecutionPath.MCP)
    path.drive(Harness(tool), root)
    root.refresh_from_db()
    tool_run = path.tool_run(root)
    if tool_run is not None:
        assert tool_run.execution_path == path.execution_path
    return root, tool_run


def settle(resumes, tool: RecordingTool) -> None:
    """Play the resumes the verdicts and wake-ups asked for, in order, each in a fresh engine."""
    while resumes.run_ids:
        Harness(tool).resume(Run.objects.get(pk=resumes.run_ids.pop(0)))


# A payment tool whose amount is a number or a text, as many services take money.
TEXT_OR_NUMBER_PAY_SCHEMA = {
    **PAY_SCHEMA,
    "properties": {**PAY_SCHEMA["properties"], "amount": {"type": ["number", "string"]}},
}


def pay_tool(**fields: Any) -> RecordingTool:
    fields.setdefault("parameters", PAY_SCHEMA)
    return RecordingTool("oa__purchase_pay", result={"card": "6222-0000-1111-2222"}, **fields)


# --- the hook the enforced-redaction promise declares, and the eval rows -----------------------------


@register_hook
class AddCardNote(PostToolUseHook):
    """An agent's result hook that puts a card number into the observation."""

    name = "test_add_card_note"
    priority = 999

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_result=f"{ctx.tool_result} (card on file: 6222-0000-3333-4444)")


@dataclass(frozen=True)
class EvalPath:
    name: str
    agent: Callable[[Any, list[Any] | None], Agent]
    """The agent an eval case runs; its paying call is made by the run ``tool_run`` names."""
    tool_run: Callable[[Run], Run | None]
    execution_path: str


EVAL_PATHS = [
    EvalPath("eval-case", paying_agent, lambda run: run, ExecutionPath.EVAL),
    EvalPath("eval-dag-step", dag_agent, the_child, ExecutionPath.DAG),
    EvalPath("eval-delegated-agent", delegating_agent, the_child, ExecutionPath.DELEGATE),
]
