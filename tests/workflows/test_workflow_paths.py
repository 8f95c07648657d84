"""Both workflow paths — an AGENT node (a full run of that agent, with its own chain) and a
CONNECTOR node (one call through the pipeline with the workflow's chain and the gate, no LLM) —
keep every invariant of a tool call: a blocking hook blocks, an argument-rewriting hook rewrites,
a PostToolUse hook rewrites the observation, a chain that cannot be built stops the path before
any tool, a call needing confirmation waits for the verdict and runs once after approval, and a
restart while parked loses nothing."""

from __future__ import annotations

import pytest

from agents import events as ev
from agents.models import Run, RunStatus, ToolExecution
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from tests.agents.engine_kit import Harness, RecordingTool, events_of
from tests.approvals.kit import PAY_ARGS, PAY_SCHEMA, pay_tool, set_policy
from tests.workflows.kit import AGENT, CONNECTOR, dispatched, drive, node, one_step_workflow, start
from workflows.models import NodeStatus, WorkflowStatus

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["dispatched"]

PATHS = pytest.mark.parametrize("path", [AGENT, CONNECTOR])


def paying(result: object = None) -> RecordingTool:
    return RecordingTool("oa__purchase_pay", result=result or {"status": "paid"}, parameters=PAY_SCHEMA)


@PATHS
def test_a_blocking_hook_blocks_the_call_and_the_tool_never_runs(personas, dispatched, path) -> None:
    tool = paying()
    hooks = [{"name": "deny_tools", "params": {"tools": ["oa__*_pay"], "message": "Payments are frozen."}}]
    workflow_run = drive(Harness(tool), start(personas, one_step_workflow(personas, path, hooks=hooks)))

    assert tool.calls == []
    step = node(workflow_run)
    assert not ToolExecution.objects.filter(run=step.run).exists()
    blocked = events_of(step.run, ev.TOOL_BLOCKED)
    assert [b["blocked_by"] for b in blocked] == ["deny_tools"]
    if path == AGENT:  # the agent hears the refusal and answers with it
        assert workflow_run.status == WorkflowStatus.COMPLETED
        assert "Payments are frozen." in workflow_run.output
    else:  # no model to tell: the node fails, naming the refusal
        assert workflow_run.status == WorkflowStatus.FAILED
        assert step.status == NodeStatus.FAILED
        assert "Payments are frozen." in workflow_run.error


@PATHS
def test_an_argument_rewriting_hook_rewrites_what_runs(personas, dispatched, path) -> None:
    tool = paying()
    hooks = [{"name": "set_arguments", "params": {"tools": ["oa__*"], "values": {"amount": 1.0}}}]
    workflow_run = drive(Harness(tool), start(personas, one_step_workflow(personas, path, hooks=hooks)))

    assert workflow_run.status == WorkflowStatus.COMPLETED
    assert tool.calls == [{"purchase_id": "PO-1001", "amount": 1.0}]
    assert ToolExecution.objects.get(run=node(workflow_run).run).args["amount"] == 1.0


@PATHS
def test_a_post_tool_use_hook_rewrites_the_observation(personas, dispatched, path) -> None:
    tool = paying({"status": "paid", "iban": "DE89370400440532013000"})
    hooks = [{"name": "redact_result", "params": {"patterns": "DE\\d{20}"}}]
    workflow_run = drive(Harness(tool), start(personas, one_step_workflow(personas, path, hooks=hooks)))

    assert workflow_run.status == WorkflowStatus.COMPLETED
    assert len(tool.calls) == 1
    assert "DE89370400440532013000" not in workflow_run.output
    assert "[redacted]" in workflow_run.output
    assert "[redacted]" in node(workflow_run).output


@PATHS
def test_a_chain_that_cannot_be_built_stops_the_path_before_any_tool(personas, dispatched, path) -> None:
    tool = paying()
    workflow_run = start(personas, one_step_workflow(personas, path))
    # A hook removed from the catalog after the workflow started: the recorded chain names it.
    retired = {
        "v": 1,
        "declared": [{"kind": "class", "name": "retired_hook", "point": "PreToolUse", "matcher": "",
                      "params": {}, "priority": 10, "timeout": 5, "on_error": "block", "source": "agent"}],
        "system": [],
    }  # fmt: skip
    Run.objects.filter(pk=node(workflow_run).run_id).update(hook_chain=retired)

    workflow_run = drive(Harness(tool), workflow_run)

    assert tool.calls == []
    step = node(workflow_run)
    assert step.run.status == RunStatus.FAILED and "retired_hook" in step.run.error
    assert not ToolExecution.objects.filter(run=step.run).exists()
    assert workflow_run.status == WorkflowStatus.FAILED
    assert "node 'step' failed" in workflow_run.error and "retired_hook" in workflow_run.error


@PATHS
def test_a_call_needing_confirmation_waits_for_the_verdict_and_runs_once(personas, dispatched, path) -> None:
    set_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    workflow_run = drive(harness, start(personas, one_step_workflow(personas, path)))

    assert workflow_run.status == WorkflowStatus.AWAITING_APPROVAL
    step = node(workflow_run)
    assert step.status == NodeStatus.AWAITING_APPROVAL and tool.calls == []
    request = ConfirmationRequest.objects.get(run=step.run)
    assert request.tool_args == PAY_ARGS

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert harness.resume(step.run) == RunStatus.COMPLETED
    assert harness.resume(step.run) is None  # a duplicate resume finds nothing to do

    workflow_run.refresh_from_db()
    assert tool.calls == [PAY_ARGS]
    assert workflow_run.status == WorkflowStatus.COMPLETED
    assert node(workflow_run).status == NodeStatus.COMPLETED


@PATHS
def test_a_rejection_ends_the_step_without_running_the_tool(personas, dispatched, path) -> None:
    set_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    workflow_run = drive(harness, start(personas, one_step_workflow(personas, path)))
    request = ConfirmationRequest.objects.get(run=node(workflow_run).run)

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="Not this month")
    harness.resume(node(workflow_run).run)

    workflow_run.refresh_from_db()
    assert tool.calls == []
    assert workflow_run.is_terminal
    assert "Not this month" in (workflow_run.output + workflow_run.error)


@PATHS
def test_a_restart_while_parked_loses_nothing(personas, dispatched, path) -> None:
    set_policy(personas)
    tool = pay_tool()
    workflow_run = drive(Harness(tool), start(personas, one_step_workflow(personas, path)))
    step = node(workflow_run)
    assert step.run.status == RunStatus.AWAITING_APPROVAL
    assert step.run.lease_owner == "", "parked: no process holds the run"

    # The process stops; another one, with nothing in memory, takes the verdict and the resume.
    confirmation_decide(
        request_id=ConfirmationRequest.objects.get(run=step.run).pk, user=personas.approver, approve=True
    )
    assert (
        Harness(tool).resume(Run.objects.get(pk=step.run_id), reason="after a restart") == RunStatus.COMPLETED
    )

    workflow_run.refresh_from_db()
    assert workflow_run.status == WorkflowStatus.COMPLETED
    assert tool.calls == [PAY_ARGS]
    assert ToolExecution.objects.filter(run=step.run).count() == 1
    assert len(events_of(step.run, ev.RUN_STARTED)) == 1
    assert [n.status for n in workflow_run.nodes.order_by("position")] == ["completed"] * 3


def test_a_connector_call_that_fails_fails_the_workflow_naming_the_error(personas, dispatched) -> None:
    from agents.tools.base import ToolError

    def refuse(args: dict) -> None:
        raise ToolError("HTTP 409: purchase PO-1001 is already paid")

    workflow_run = drive(Harness(paying(refuse)), start(personas, one_step_workflow(personas, CONNECTOR)))

    assert workflow_run.status == WorkflowStatus.FAILED
    assert "already paid" in workflow_run.error
    assert node(workflow_run).status == NodeStatus.FAILED


def test_a_connector_call_cut_off_mid_way_is_never_run_again(personas, dispatched) -> None:
    tool = paying()
    workflow_run = start(personas, one_step_workflow(personas, CONNECTOR))
    run = node(workflow_run).run
    # A worker started the call, recorded it, and died before its outcome was stored.
    Run.objects.filter(pk=run.pk).update(checkpoint={"v": 1, "message_count": 0, "node": "step"})
    ToolExecution.objects.create(
        run=run, tool_call_id="node-step", tool_name="oa__purchase_pay", args=PAY_ARGS
    )

    drive(Harness(tool), workflow_run)

    workflow_run.refresh_from_db()
    assert tool.calls == []
    assert workflow_run.status == WorkflowStatus.FAILED and "Outcome unknown" in workflow_run.error
    assert ToolExecution.objects.get(run=run).status == ToolExecution.Status.UNKNOWN
