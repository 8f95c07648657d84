"""The engine of a CONNECTOR node's run: one tool call through the pipeline, no LLM.

The call (the node's connector action with its templated arguments) goes through the same
:class:`~agents.engine.pipeline.ToolPipeline` as an agent's calls, with the workflow's chain —
its own hooks, the organisation's enforced ones, the approval gate last — so it can be blocked,
rewritten, sent to a human or have its result rewritten like any other (docs/design.md §1.2). A chain
that cannot be built fails the run before the tool is looked at (docs/design.md §1.1). A suspension parks
the run; the verdict resumes it here (``agents.engine.runner`` asks this app which engine drives
a workflow run), and the pipeline's execution record makes the call run at most once.

Checkpoint: ``{"v": 1, "messages": [], "node": "<id>"}``.
"""

from __future__ import annotations

from typing import Any

from agents.engine.db import db
from agents.engine.react import run_facts
from agents.engine.single_call import SingleCallEngine
from agents.models import ConnectorAction
from agents.tools.base import Tool
from agents.tools.toolbox import action_tool
from workflows.models import WorkflowNodeRun


def _node_of(*, run_id: int) -> WorkflowNodeRun:
    return WorkflowNodeRun.objects.select_related("workflow_run").get(run_id=run_id)


def _action_tool(*, node: WorkflowNodeRun) -> dict[str, Tool]:
    """The node's connector action as the one tool of the run, if it still can be called."""
    spec = node.workflow_run.graph
    action_id = next(n["action"] for n in spec["nodes"] if n["id"] == node.node_id)
    action = (
        ConnectorAction.objects.select_related("connector")
        .filter(
            pk=action_id,
            connector__organization_id=node.workflow_run.organization_id,
            connector__archived_at__isnull=True,
            enabled=True,
            missing_since__isnull=True,
        )
        .first()
    )
    if action is None:
        return {}
    return {action.tool_name: action_tool(action, action.connector)}


def _tool_name(*, node: WorkflowNodeRun) -> str:
    action_id = next(n["action"] for n in node.workflow_run.graph["nodes"] if n["id"] == node.node_id)
    action = ConnectorAction.objects.select_related("connector").filter(pk=action_id).first()
    return action.tool_name if action is not None else f"action_{action_id}"


class ConnectorNodeEngine(SingleCallEngine):
    """Drives a CONNECTOR node's run. Precondition: ``owner`` holds the run's lease.

    ``tools_factory(agent)``, when given, replaces the node's tool (tests); ``provider_factory``
    is accepted and unused: no model is called."""

    crash_label = "workflow node run"
    chain_owner = "workflow"
    #: The node whose run this is, read once the run is open.
    node: WorkflowNodeRun

    async def _opened(self) -> None:
        self.node = await db(_node_of, run_id=self.run_id)

    async def _fresh_messages(self) -> list[dict[str, Any]]:
        return []  # no conversation: the node's call is all the run does

    def _fresh_state(self) -> dict[str, Any]:
        return {"node": self.node.node_id}

    async def _drive(self) -> str:
        run, node = self.run, self.node
        # The chain recorded when the workflow run started (fail closed if it cannot be built).
        chain, registry = await self._hooks()
        if self.tools_factory is not None:
            tools = await db(self.tools_factory, agent=run.agent)
        else:
            tools = await db(_action_tool, node=node)
        name = await db(_tool_name, node=node)
        facts = {
            **run_facts(run, chain),
            "workflow_id": node.workflow_run.workflow_id,
            "workflow_run_id": node.workflow_run_id,
            "node_id": node.node_id,
        }
        call = {"id": node.tool_call_id, "name": name, "arguments": node.arguments or {}}
        return await self._run_single_call(call, registry=registry, tools=tools, facts=facts)
