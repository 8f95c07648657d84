"""Every execution path runs the hooks (DESIGN §1.2): one table, the same promises on each row.

A row (:class:`Path`) says how a user's request reaches a tool call on that path: which agents
(or workflow) it needs, where the hooks are declared, how it starts, how it is driven and which
run makes the tool call. Each test states one promise and runs it on every row:

* a blocking PreToolUse hook blocks; an arg-rewriting hook rewrites; a PostToolUse hook rewrites
  the observation;
* a chain that cannot be built stops the path before any tool runs;
* a ``requires_confirmation`` tool waits for a verdict and runs once after approval;
* a restart while parked loses nothing.

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

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agents import events as ev
from agents.models import Agent, ConnectorCallLog, ExecutionPath, Run, RunStatus
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from hooks import HookContext, HookResult, PostToolUseHook
from hooks.catalog import HookDeclarationError, parse_declaration, register_hook, resolve_chain
from tests.agents.engine_kit import Harness, RecordingTool, events_of
from tests.approvals.kit import PAY_SCHEMA, set_policy
from tests.personas import make_agent, make_hook, scripted
from tests.workflows.kit import drive as drive_workflow
from tests.workflows.kit import node, one_step_graph, pay_action
from workflows.models import Workflow, WorkflowRun
from workflows.services import workflow_run_start

# Verdicts act after commit (they resume runs): let transactions really commit.
pytestmark = pytest.mark.django_db(transaction=True)

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
    """A model hears a blocked call and answers; without one (a CONNECTOR node) the path fails,
    naming the refusal."""


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
    ),
]

every_path = pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])


# --- driving ----------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_background_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A workflow node's run is driven by the test (``Path.drive``), not handed to an executor."""
    monkeypatch.setattr("agents.executors.dispatch_execute", lambda run_id: None)


def drive(path: Path, personas, hooks, tool: RecordingTool) -> tuple[Root, Run | None]:
    """Start the path and drive it until it ends or parks; return the root and the tool run."""
    root = path.start(personas, hooks)
    if isinstance(root, Run):  # the run the user started, not one a path made inside it
        assert root.execution_path in (ExecutionPath.API, ExecutionPath.PORTAL)
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


def pay_tool(**fields: Any) -> RecordingTool:
    return RecordingTool(
        "oa__purchase_pay", result={"card": "6222-0000-1111-2222"}, parameters=PAY_SCHEMA, **fields
    )


# --- the promises -----------------------------------------------------------------------------------


@every_path
def test_a_blocking_pre_tool_use_hook_blocks(path, personas, resumes) -> None:
    pay = pay_tool()
    hooks = [{"name": "deny_tools", "params": {"tools": ["oa__*"], "message": "Payments are frozen."}}]

    root, tool_run = drive(path, personas, hooks, pay)

    assert pay.calls == []
    [blocked] = events_of(tool_run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "deny_tools" and blocked["error"] == "Payments are frozen."
    if path.has_model:  # the model hears the refusal and answers
        assert root.status == RunStatus.COMPLETED
    else:  # no model to tell: the path fails, naming the refusal
        assert root.status == RunStatus.FAILED and "Payments are frozen." in root.error


@every_path
def test_an_organisation_enforced_hook_blocks_though_the_path_declares_none(path, personas, resumes) -> None:
    make_hook(personas.org, "deny_tools", params={"tools": ["oa__*"], "message": "Acme froze payments."})
    pay = pay_tool()

    _root, tool_run = drive(path, personas, None, pay)

    assert pay.calls == []
    [blocked] = events_of(tool_run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "deny_tools" and blocked["error"] == "Acme froze payments."
    assert [i["source"] for i in tool_run.hook_chain["declared"]] == ["organisation"]


@every_path
def test_an_argument_rewriting_hook_rewrites(path, personas, resumes) -> None:
    pay = pay_tool()
    hooks = [{"name": "set_arguments", "params": {"tools": "oa__purchase_pay", "values": {"amount": 1000}}}]

    root, tool_run = drive(path, personas, hooks, pay)

    assert root.status == RunStatus.COMPLETED
    assert pay.calls == [{"purchase_id": "PO-1", "amount": 1000}]
    [started] = events_of(tool_run, ev.TOOL_STARTED)
    assert started["arguments"]["amount"] == 1000


@every_path
def test_a_post_tool_use_hook_rewrites_the_observation(path, personas, resumes) -> None:
    pay = pay_tool()
    hooks = [{"name": "redact_result", "params": {"patterns": [r"\d{4}-\d{4}-\d{4}-\d{4}"]}}]

    root, tool_run = drive(path, personas, hooks, pay)

    assert root.status == RunStatus.COMPLETED and len(pay.calls) == 1
    [finished] = events_of(tool_run, ev.TOOL_FINISHED)
    assert "[redacted]" in finished["observation"] and "6222" not in finished["observation"]
    assert "6222" not in root.output


@every_path
def test_a_chain_that_cannot_be_built_stops_the_path_before_any_tool_runs(path, personas, resumes) -> None:
    pay = pay_tool()

    root, tool_run = drive(path, personas, ["no_such_hook"], pay)

    assert pay.calls == []
    failed = tool_run if tool_run is not None else root
    failed.refresh_from_db()
    assert failed.status == RunStatus.FAILED and "hooks cannot be built" in failed.error
    whose = "agent" if path.has_model else "workflow"  # a CONNECTOR node runs the workflow's chain
    assert f"the {whose}'s hooks cannot be built" in failed.error
    assert events_of(failed, ev.RUN_FAILED)[-1]["stage"] == "hooks"
    assert events_of(failed, ev.TOOL_STARTED) == []
    root.refresh_from_db()
    assert "hooks cannot be built" in root.error + root.output, "the user is told why"


@every_path
def test_a_tool_requiring_confirmation_waits_for_the_verdict_and_runs_once_after_approval(
    path, personas, resumes
) -> None:
    set_policy(personas)
    pay = pay_tool(requires_confirmation=True)

    root, tool_run = drive(path, personas, None, pay)

    assert root.status == RunStatus.AWAITING_APPROVAL and pay.calls == []
    request = ConfirmationRequest.objects.get()
    assert request.run == tool_run

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    settle(resumes, pay)

    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED, root.error
    assert pay.calls == [PAY_ARGS]


@every_path
def test_a_restart_while_parked_loses_nothing(path, personas, resumes) -> None:
    set_policy(personas)
    pay = pay_tool(requires_confirmation=True)
    root, tool_run = drive(path, personas, None, pay)
    parked = {run.pk: run.checkpoint for run in Run.objects.filter(status=RunStatus.AWAITING_APPROVAL)}
    assert root.status == RunStatus.AWAITING_APPROVAL and tool_run.pk in parked

    # A restart: fresh engines pick every parked run up again (as the orphan sweep does) before
    # anyone decided. Each parks again; nothing runs, nothing is asked twice.
    for run_id in sorted(parked, reverse=True):
        assert Harness(pay).resume(Run.objects.get(pk=run_id)) == RunStatus.AWAITING_APPROVAL
    assert pay.calls == [] and ConfirmationRequest.objects.count() == 1

    request = ConfirmationRequest.objects.get()
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    settle(resumes, pay)

    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]
    for run in Run.objects.filter(pk__in=parked):
        seqs = list(run.events.values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1)), "every run's trace is whole and gap-free"


# --- enforced means last word (DESIGN §1.12) --------------------------------------------------------


@register_hook
class AddCardNote(PostToolUseHook):
    """An agent's result hook that puts a card number into the observation."""

    name = "test_add_card_note"
    priority = 999

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_result=f"{ctx.tool_result} (card on file: 6222-0000-3333-4444)")


RAISE_TO_999_999 = {
    "name": "set_arguments",
    "params": {"tools": "oa__purchase_pay", "values": {"amount": 999_999}},
}


@every_path
def test_an_agent_hook_cannot_rewrite_arguments_the_organisation_set(path, personas, resumes) -> None:
    make_hook(personas.org, "set_arguments", params={"tools": "oa__purchase_pay", "values": {"amount": 1}})
    pay = pay_tool()
    hooks = [{**RAISE_TO_999_999, "params": {**RAISE_TO_999_999["params"], "priority": 999}}]

    _root, tool_run = drive(path, personas, hooks, pay)

    assert pay.calls == [{"purchase_id": "PO-1", "amount": 1}]
    assert [i["source"] for i in tool_run.hook_chain["declared"]][-1] == "organisation", "recorded last"


@every_path
def test_an_enforced_approval_condition_sees_the_amount_an_agent_hook_wrote(path, personas, resumes) -> None:
    """The organisation asks a person for payments from 10,000; an agent hook raises a payment
    of 5,000 to 999,999 after the model proposed it: the call waits for a person, who is shown
    999,999 (before, the condition was checked first and the raised payment ran unasked)."""
    set_policy(personas)
    make_hook(personas.org, "confirm_when", priority=1,
              params={"conditions": [{"field": "amount", "op": ">=", "value": 10_000}]})  # fmt: skip
    pay = pay_tool()

    root, tool_run = drive(path, personas, [RAISE_TO_999_999], pay)

    assert root.status == RunStatus.AWAITING_APPROVAL and pay.calls == []
    request = ConfirmationRequest.objects.get()
    assert request.run == tool_run and request.tool_args["amount"] == 999_999


@every_path
def test_enforced_redaction_has_the_last_word_on_what_the_model_reads(path, personas, resumes) -> None:
    make_hook(personas.org, "redact_result", params={"patterns": [r"\d{4}-\d{4}-\d{4}-\d{4}"]})
    pay = pay_tool()

    root, tool_run = drive(path, personas, ["test_add_card_note"], pay)

    [finished] = events_of(tool_run, ev.TOOL_FINISHED)
    assert "card on file: [redacted]" in finished["observation"], "the agent's hook ran, then the org's"
    assert "6222" not in finished["observation"] and "6222" not in root.output + root.error


# --- evals touch nothing, on every path inside them (DESIGN §1.2) ------------------------------------


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


@pytest.mark.parametrize("eval_path", EVAL_PATHS, ids=[p.name for p in EVAL_PATHS])
@pytest.mark.parametrize("flagged", [False, True], ids=["payment", "payment-requiring-confirmation"])
def test_an_eval_reaches_no_tool_and_asks_nobody(eval_path, flagged, personas, resumes) -> None:
    from evals.services import eval_run_start, eval_set_create

    set_policy(personas)
    make_hook(
        personas.org, "confirm_when", params={"conditions": [{"field": "amount", "op": ">=", "value": 1}]}
    )
    make_hook(personas.org, "audit_log")
    pay = pay_tool(requires_confirmation=flagged)
    agent = eval_path.agent(personas, [{"name": "deny_tools", "params": {"tools": ["*"]}}])
    cases = [{"input": "pay PO-1", "expectation": "contains", "expected": ""}]
    eval_set = eval_set_create(
        user=personas.operator, organization_id=personas.org.pk, name="Pay", cases=cases
    )

    eval_run = eval_run_start(eval_set=eval_set, agent=agent, user=personas.operator)
    root = eval_run.results.get().run
    Harness(pay).execute(root)

    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED, root.error
    assert pay.calls == [] and not ConfirmationRequest.objects.exists()
    tool_run = eval_path.tool_run(root)
    assert tool_run.execution_path == eval_path.execution_path and tool_run.hooks_bypassed
    assert tool_run.hook_chain["sandbox"] == root.hook_chain["sandbox"]
    assert events_of(tool_run, ev.TOOL_BLOCKED) == [], "the agent's own hooks were bypassed"
    assert tool_run.output.startswith("Result: Dry run (eval): oa__purchase_pay")
    # The enforced audit log records live calls only (a delegate's call_agent is one).
    assert not ConnectorCallLog.objects.filter(tool_name="oa__purchase_pay").exists()
    assert eval_run.results.get().outcome == "passed"


# --- those who configure do not decide (DESIGN §1.13) -------------------------------------------------


@every_path
def test_the_operator_who_configured_the_agent_cannot_decide_its_request(path, personas, resumes) -> None:
    """Oscar owns and configures every agent here, is not an approver, and a policy written around
    the admin even names him: whatever path opened the request, he is not in its approver
    snapshot and his approval changes nothing; April's decides."""
    set_policy(personas).named_users.set([personas.operator])
    pay = pay_tool(requires_confirmation=True)

    root, tool_run = drive(path, personas, None, pay)

    request = ConfirmationRequest.objects.get()
    assert request.run == tool_run
    assert personas.operator not in request.approvers.all()
    refused = confirmation_decide(request_id=request.pk, user=personas.operator, approve=True)
    request.refresh_from_db()
    assert not refused.accepted and request.status == "pending" and pay.calls == []

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    settle(resumes, pay)
    root.refresh_from_db()
    assert root.status == RunStatus.COMPLETED and pay.calls == [PAY_ARGS]
