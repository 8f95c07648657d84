"""Runs whose one tool call is all they do, with no model: a workflow's CONNECTOR node, an MCP
gateway call. They share how the call is proposed and how the run ends."""

from __future__ import annotations

from typing import Any

from agents import events as ev
from agents.engine import store
from agents.engine.base import RunEngine, RunFailed
from agents.engine.db import db
from agents.engine.pipeline import Blocked, Suspended, ToolPipeline
from agents.models import RunStatus, ToolExecution
from agents.tools.base import Tool
from hooks import HookRegistry


class SingleCallEngine(RunEngine):
    """A run that makes ``call`` (``{"id", "name", "arguments"}``) through ``pipeline`` and ends.
    Precondition: ``owner`` holds the run's lease."""

    async def _run_single_call(
        self, call: dict[str, Any], *, registry: HookRegistry, tools: dict[str, Tool], facts: dict[str, Any]
    ) -> str:
        """Propose the call (in a fresh run), run it through the one pipeline with ``registry``,
        ``tools`` and the hooks' ``facts``, and end the run by its outcome: parked on a
        suspension; failed, naming the refusal, on a block; failed too on a call that failed or
        whose outcome is unknown (a crash mid-call), since no model reads the observation to decide
        what next; completed with the observation otherwise."""
        journal, run = self.journal, self.run
        pipeline = ToolPipeline(
            journal=journal,
            registry=registry,
            tools=tools,
            agent_id=run.agent_id,
            user_id=run.user_id,
            facts=facts,
        )
        if self.started_here:
            tool = tools.get(call["name"])
            proposed = {
                "tool_call_id": call["id"],
                "tool": call["name"],
                # What people read for it, as a model's proposal carries (events.TOOL_PROPOSED).
                "title": tool.spec.display if tool is not None else call["name"],
                "arguments": call["arguments"],
            }
            journal.emit(ev.TOOL_PROPOSED, proposed)
            journal.checkpoint_changed()
        outcome = await pipeline.run(call, fresh=self.started_here)
        if isinstance(outcome, Suspended):
            return await journal.park(
                tool_call_id=call["id"],
                tool=call["name"],
                reason=outcome.reason,
                detail=outcome.detail,
                still_waiting=outcome.still_waiting,
            )
        if isinstance(outcome, Blocked):
            raise RunFailed(outcome.text, "blocked")
        status = outcome.status
        if status is None:  # an outcome the pipeline did not see the record of
            execution = await db(store.execution_find, run_id=self.run_id, tool_call_id=call["id"])
            status = execution.status if execution is not None else None
        if status is not None and status != ToolExecution.Status.SUCCEEDED:
            raise RunFailed(outcome.text, "tool")
        return await journal.finish(RunStatus.COMPLETED, output=outcome.text)
