"""The ReAct engine: LLM → tool calls (through the pipeline) → observations → … → final answer.

One :class:`ReactEngine` drives one run while its process holds the run's lease. What it writes
goes through the run's :class:`~agents.engine.journal.RunJournal` (events, checkpoint, endings);
each tool call goes through the :class:`~agents.engine.pipeline.ToolPipeline` shared by every
path. Everything it needs to continue lives in the checkpoint, saved after every step, so any
process can pick the run up after a suspension or a crash (docs/design.md §4):

``{"v": 1, "message_count": n, "session_context": [...] | null, "iteration": n,
"pending_calls": [{"id", "name", "arguments", "raw_arguments"}], "observations": {id: text}}``.

Tool calls of one turn run concurrently; if one of them waits for a human, the others finish
and the run parks on the first that waits.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import events as ev
from agents.engine.base import RunEngine, RunFailed
from agents.engine.db import db
from agents.engine.delegation import delegation_tools
from agents.engine.pipeline import Suspended, ToolPipeline
from agents.llm.base import LLMProvider, LLMResponse
from agents.models import Run, RunStatus

RULES = (
    "Rules enforced by the platform: a tool call may be blocked, rewritten or sent to a human for "
    "approval. When a call is blocked or rejected, do not retry the same call: explain the outcome "
    "to the user. An observation saying a call's outcome is unknown means it may or may not have "
    "taken effect: do not repeat it."
)


def run_facts(run: Run, chain: dict[str, Any]) -> dict[str, Any]:
    """The JSON-able facts every hook of ``run`` sees in ``metadata``."""
    agent = run.agent
    return {
        "org_id": agent.organization_id,
        "org_read_only": agent.organization.read_only,
        "conversation_id": run.conversation_id,
        "run_id": run.pk,
        "execution_path": run.execution_path,
        "require_confirmation_for_all": bool(chain.get("require_confirmation_for_all")),
    }


class ReactEngine(RunEngine):
    """Drives one run. Precondition: ``owner`` holds the run's lease (``store.run_claim``)."""

    def __init__(self, run_id: int, **options: Any) -> None:
        super().__init__(run_id, **options)
        self._proposed_here: set[str] = set()

    def _fresh_state(self) -> dict[str, Any]:
        return {"session_context": None, "iteration": 0, "pending_calls": [], "observations": {}}

    async def _prepare(self) -> tuple[LLMProvider, ToolPipeline]:
        """Everything a run needs before its first step, or :class:`RunFailed` (fail closed)."""
        run = self.run
        essentials = await self._essentials()
        tools = essentials.tools
        options = {"provider_factory": self.provider_factory, "tools_factory": self.tools_factory}
        delegation = await db(delegation_tools, run=run, options=options)
        if delegation:
            if delegation.keys() & tools.keys():
                raise RunFailed("the agent's tools cannot be built: a tool is named call_agent", "tools")
            tools = {**tools, **delegation}
        pipeline = ToolPipeline(
            journal=self.journal,
            registry=essentials.registry,
            tools=tools,
            agent_id=run.agent_id,
            user_id=run.user_id,
            facts=run_facts(run, essentials.chain),
            sandboxed=essentials.chain.get("sandbox") is not None,
        )
        return essentials.provider, pipeline

    async def _drive(self) -> str:
        journal = self.journal
        provider, pipeline = await self._prepare()
        self.tools = pipeline.tools
        agent = self.run.agent
        cp = self.checkpoint
        if cp["session_context"] is None:
            outcome = await pipeline.registry.run_session_start(pipeline.context())
            shadows = journal.emit_side_effects(outcome.side_effects, point="SessionStart", tool_call_id=None)
            if shadows:
                await pipeline.record_shadows(shadows, point="SessionStart", tool_call_id=None)
            if not outcome.ok:
                raise RunFailed(outcome.error or "a session hook failed", "hooks")
            cp["session_context"] = outcome.additional_context
            await journal.save()

        while True:
            if cp["pending_calls"]:
                suspension = await self._run_pending_calls(pipeline)
                if suspension is not None:
                    call = suspension.call
                    delegate = suspension.detail.get("delegate_run_id")
                    if delegate is not None:
                        await journal.relay_approvals(child_run_ids=[delegate])
                    return await journal.park(
                        tool_call_id=call["id"],
                        tool=call["name"],
                        reason=suspension.reason,
                        detail=suspension.detail,
                        still_waiting=suspension.still_waiting,
                    )
            if cp["iteration"] >= agent.max_iterations:
                raise RunFailed(
                    f"the agent did not finish within {agent.max_iterations} steps", "max_iterations"
                )
            cp["iteration"] += 1
            response = await self._complete(
                provider, messages=self._messages(), tools=self._tool_specs(), on_delta=journal.on_delta
            )
            cp["messages"].append(response.as_message())
            journal.emit(ev.LLM_MESSAGE, self._message_payload(response))
            if not response.tool_calls:
                return await journal.finish(RunStatus.COMPLETED, output=response.content)
            cp["pending_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments, "raw_arguments": c.raw_arguments}
                for c in response.tool_calls
            ]
            cp["observations"] = {}
            self._proposed_here = {call["id"] for call in cp["pending_calls"]}
            for call in cp["pending_calls"]:
                tool = self.tools.get(call["name"])
                journal.emit(
                    ev.TOOL_PROPOSED,
                    {
                        "tool_call_id": call["id"],
                        "tool": call["name"],
                        # What people read for it (the page shows the name only on request).
                        "title": tool.spec.display if tool is not None else call["name"],
                        "arguments": call["arguments"],
                    },
                )
            # Saved with the next write (at the latest, the one recording a tool's start).
            journal.checkpoint_changed()

    def _message_payload(self, response: LLMResponse) -> dict[str, Any]:
        return {
            "content": response.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
            ],
            "iteration": self.checkpoint["iteration"],
        }

    def _messages(self) -> list[dict[str, Any]]:
        parts = [self.run.agent.instructions.strip(), *(self.checkpoint["session_context"] or []), RULES]
        system = "\n\n".join(p for p in parts if p)
        return [{"role": "system", "content": system}, *self.checkpoint["messages"]]

    def _tool_specs(self) -> list[dict[str, Any]]:
        return [tool.spec.as_openai_tool() for tool in self.tools.values()]

    async def _run_pending_calls(self, pipeline: ToolPipeline) -> Suspended | None:
        """Run the turn's calls that have no observation yet, concurrently. Returns the first
        suspension (the others' observations are kept in the checkpoint), else ``None`` once
        every observation joined the messages."""
        cp = self.checkpoint
        todo = [c for c in cp["pending_calls"] if c["id"] not in cp["observations"]]
        if len(todo) == 1:  # the common turn: no task to run one call beside nothing
            [call] = todo
            outcomes: list[Any] = [await pipeline.run(call, fresh=call["id"] in self._proposed_here)]
        else:
            outcomes = await asyncio.gather(
                *(pipeline.run(c, fresh=c["id"] in self._proposed_here) for c in todo),
                return_exceptions=True,
            )
        suspension: Suspended | None = None
        for call, outcome in zip(todo, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                raise outcome
            if isinstance(outcome, Suspended):
                suspension = suspension or outcome
            else:
                cp["observations"][call["id"]] = outcome.text
        if suspension is not None:
            return suspension
        for call in cp["pending_calls"]:
            cp["messages"].append(
                {"role": "tool", "tool_call_id": call["id"], "content": cp["observations"][call["id"]]}
            )
        # No checkpoint here: the next one is saved with the LLM's answer. A crash in between
        # re-enters these calls, finds their executions recorded and replays their observations.
        cp["pending_calls"], cp["observations"] = [], {}
        return None
