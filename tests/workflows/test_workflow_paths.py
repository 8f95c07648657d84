"""What is particular to the two workflow paths — an AGENT node (a full run of that agent, with
its own chain) and a CONNECTOR node (one call through the pipeline with the workflow's chain and
the gate, no LLM): a rejection ends the step, a connector call that fails fails the workflow, and
a call cut off mid-way never runs again.

The promises every path keeps (a blocking hook blocks, an argument-rewriting hook rewrites, a
PostToolUse hook rewrites the observation, a chain that cannot be built stops the path, a call
needing confirmation runs once after approval, a restart while parked loses nothing) are proved
for both nodes, beside every other path, by the table in tests/test_every_path.py."""

from __future__ import annotations

import pytest

from agents.models import Run, ToolExecution
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from tests.agents.engine_kit import Harness, RecordingTool
from tests.approvals.kit import PAY_ARGS, PAY_SCHEMA, pay_tool, set_policy
from tests.workflows.kit import AGENT, CONNECTOR, dispatched, drive, node, one_step_workflow, start
from workflows.models import NodeStatus, WorkflowStatus

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["dispatched"]

PATHS = pytest.mark.parametrize("path", [AGENT, CONNECTOR])


def paying(result: object = None) -> RecordingTool:
    return RecordingTool("oa__purchase_pay", result=result or {"status": "paid"}, parameters=PAY_SCHEMA)


@PATHS
def test_a_rejection_ends_the_step_without_running_the_tool(personas, dispatched, path) -> None:
    set_policy(personas)
    tool = pay_tool()
    harness = Harness(tool)
    workflow_run = drive(harness, start(personas, one_step_workflow(personas, path)))
    # While the step waits for the verdict, the workflow run and its node say so.
    assert workflow_run.status == WorkflowStatus.AWAITING_APPROVAL
    assert node(workflow_run).status == NodeStatus.AWAITING_APPROVAL
    request = ConfirmationRequest.objects.get(run=node(workflow_run).run)

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="Not this month")
    harness.resume(node(workflow_run).run)

    workflow_run.refresh_from_db()
    assert tool.calls == []
    assert workflow_run.is_terminal
    assert "Not this month" in (workflow_run.output + workflow_run.error)


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
