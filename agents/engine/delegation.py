"""Delegation: the ``call_agent`` tool, by which an agent asks another agent of its organisation.

An agent declares the agents it may call (``Agent.delegates``, same organisation, not archived);
it then has a ``call_agent`` tool. A call goes through the caller's pipeline like any tool call
(its hooks may block or rewrite it); the delegate then runs as a child :class:`~agents.models.Run`
(``execution_path="delegate"``, ``parent_run``) with **its own** hook chain, resolved from its own
declarations and its own ``require_confirmation_for_all`` — never the caller's (docs/design.md §1.2).

Refused with a plain observation, before any delegate runs: an agent that is not declared, one
already in the chain of callers (a cycle), and a call deeper than ``AGENT_DELEGATION_MAX_DEPTH``.

A delegate that waits for an approval parks; so does the caller, on its ``call_agent`` call. The
verdict resumes the delegate, whose ending wakes the caller (:mod:`agents.engine.runner`), which
re-enters the call and reads the delegate's answer: the child run is keyed by the call's id, so
re-entering never starts a second delegate (:class:`~agents.tools.base.ReentrantTool`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agents.checks import hook_chain_of, sandbox_chain_of
from agents.engine import child_driver, child_runs
from agents.engine.db import db
from agents.models import Agent, ExecutionPath, Run, RunStatus
from agents.tools.base import ReentrantTool, ToolError, ToolSpec, ToolSuspension

TOOL_NAME = "call_agent"


def delegates_of(agent: Agent) -> dict[str, int]:
    """The agents ``agent`` may call, by the name its model uses (``"Name #id"`` when two share
    a name): declared, of the same organisation, not archived. Runs in the database thread."""
    rows = list(
        agent.delegates.filter(organization_id=agent.organization_id, archived_at__isnull=True)
        .order_by("name", "pk")
        .values_list("pk", "name")
    )
    names = [name for _, name in rows]
    return {(name if names.count(name) == 1 else f"{name} #{pk}"): pk for pk, name in rows}


def delegation_tools(*, run: Run, options: dict[str, Any]) -> dict[str, CallAgentTool]:
    """``{"call_agent": tool}`` for a run whose agent declared delegates, else ``{}``.
    ``options`` (the engine's factories) are passed on to the delegates' engines."""
    delegates = delegates_of(run.agent)
    if not delegates:
        return {}
    return {TOOL_NAME: CallAgentTool(caller=run, delegates=delegates, options=options)}


def _delegate_open(
    *, caller_id: int, call_id: str, agent_id: int, input: str, sandbox: dict[str, Any] | None
) -> child_runs.ChildState:
    """The delegate's run for this call, created the first time with the delegate's own chain —
    or, inside an eval (``sandbox``), the eval's sandboxed chain of the delegate: it inherits the
    sandbox, so it reaches nothing outside and never asks a person (docs/design.md §1.2)."""
    existing = Run.objects.filter(parent_run_id=caller_id, parent_call_id=call_id).first()
    if existing is not None:
        return child_runs.ChildState(existing.pk, existing.status, existing.output, existing.error)
    agent = Agent.objects.select_related("organization").get(pk=agent_id)
    # The delegate's own hooks, not the caller's.
    chain = hook_chain_of(agent) if sandbox is None else sandbox_chain_of(agent, sandbox=sandbox)
    return child_runs.child_run_open(
        parent_id=caller_id,
        call_id=call_id,
        agent_id=agent_id,
        input=input,
        execution_path=ExecutionPath.DELEGATE,
        hook_chain=chain,
        own_conversation=True,
    )


class CallAgentTool(ReentrantTool):
    """Ask a declared agent to carry out a task; its final answer is the observation."""

    def __init__(self, *, caller: Run, delegates: dict[str, int], options: dict[str, Any]) -> None:
        names = ", ".join(delegates)
        self.spec = ToolSpec(
            name=TOOL_NAME,
            description=(
                "Ask another agent to carry out a task and get its answer. The agent runs with its "
                f"own tools and rules. Agents you may call: {names}."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": f"One of: {names}"},
                    "input": {"type": "string", "minLength": 1, "maxLength": 8000},
                },
                "required": ["agent", "input"],
                "additionalProperties": False,
            },
            title="Ask another agent",
        )
        self.caller_id = caller.pk
        self.caller_agent_id = caller.agent_id
        self.sandbox = (caller.hook_chain or {}).get("sandbox")
        self.delegates = delegates
        self.options = options

    async def _refusal(self, target_id: int, name: str) -> str | None:
        """Why calling ``target_id`` from this run is refused (a cycle, too deep), else ``None``."""
        lineage = await db(child_runs.run_lineage, run_id=self.caller_id)
        if any(agent_id == target_id for agent_id, _ in lineage):
            return (
                f"Refused: {name} is already working on this request further up the chain of "
                "agents (a cycle). Do the task yourself or answer the user."
            )
        depth = 1 + sum(1 for _, path in lineage if path == ExecutionPath.DELEGATE)
        limit: int = settings.AGENT_DELEGATION_MAX_DEPTH
        if depth > limit:
            return (
                f"Refused: calling {name} would nest agents {depth} deep; the limit is {limit}. "
                "Do the task yourself or answer the user."
            )
        return None

    async def run_call(self, args: dict[str, Any], *, call_id: str) -> Any:
        name = args["agent"]
        target_id = self.delegates.get(name)
        if target_id is None:
            raise ToolError(
                f"no agent named {name!r} may be called; you may call: {', '.join(self.delegates)}"
            )
        refusal = await self._refusal(target_id, name)
        if refusal is not None:
            raise ToolError(refusal)
        child = await db(
            _delegate_open,
            caller_id=self.caller_id,
            call_id=call_id,
            agent_id=target_id,
            input=args["input"],
            sandbox=self.sandbox,
        )
        if child.status not in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
            await child_driver.child_drive(child.run_id, **self.options)
            child = await db(child_runs.child_state, run_id=child.run_id)
        if child.status == RunStatus.COMPLETED:
            return child.output
        if child.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            raise ToolError(f"{name} could not finish the task: {child.error or child.status}")
        run_id = child.run_id

        async def still_waiting() -> bool:
            return await db(child_runs.children_all_unfinished, run_ids=[run_id])

        return ToolSuspension(
            reason=f"{name} waits for an answer",
            detail={"delegate_run_id": run_id, "agent": name},
            still_waiting=still_waiting,
        )
