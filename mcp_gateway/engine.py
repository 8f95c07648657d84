"""The engine of an MCP gateway call's run: the client's one tool call through the pipeline, no LLM.

The call goes through the same :class:`~agents.engine.pipeline.ToolPipeline` as an agent's own
calls, with the chain the agent's runs keep — its hooks, its organisation's enforced ones, the
approval gate last — so it can be blocked, rewritten, sent to a person or have its result
rewritten like any other (docs/design.md §1.2). The agent's tools are built as for any run (an eval's
sandbox never applies: a gateway call is no eval). A suspension parks the run; the verdict resumes
it here (``agents.engine.runner`` asks this app which engine drives an ``mcp`` run), and the
pipeline's execution record makes the call run at most once.

Checkpoint: ``{"v": 1, "messages": [], "gateway_call": <id>}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agents.engine.base import RunFailed
from agents.engine.db import db
from agents.engine.react import run_facts
from agents.engine.single_call import SingleCallEngine
from agents.tools.base import Tool
from agents.tools.toolbox import ToolboxError, tools_for_agent
from mcp_gateway.models import GatewayCall


def engine_for_gateway_run(run_id: int) -> Callable[..., Any] | None:
    """Every ``mcp`` run is a gateway call's (``agents.engine.runner`` resolver)."""
    return GatewayCallEngine


def _call_of(*, run_id: int) -> GatewayCall:
    return GatewayCall.objects.select_related("gateway").get(run_id=run_id)


def tools_or_error(
    agent: Any, tools_factory: Callable[[Any], dict[str, Tool]] = tools_for_agent
) -> dict[str, Tool] | ToolboxError:
    """The agent's tools, or why they cannot be built (for the drive to report)."""
    try:
        return tools_factory(agent)
    except ToolboxError as exc:
        return exc


def _call_and_tools(
    *, run_id: int, agent: Any, tools_factory: Callable[[Any], dict[str, Tool]]
) -> tuple[GatewayCall, dict[str, Tool] | ToolboxError]:
    """The run's call and the agent's tools (or why they cannot be built): one trip."""
    return _call_of(run_id=run_id), tools_or_error(agent, tools_factory)


class GatewayCallEngine(SingleCallEngine):
    """Drives a gateway call's run. Precondition: ``owner`` holds the run's lease.

    ``tools_factory(agent)``, when given, replaces the agent's tools (tests); ``provider_factory``
    is accepted and unused: no model is called."""

    crash_label = "MCP gateway call run"
    call: GatewayCall
    tools: dict[str, Tool] | ToolboxError

    def __init__(
        self,
        run_id: int,
        *,
        call: GatewayCall | None = None,
        tools: dict[str, Tool] | ToolboxError | None = None,
        ended: asyncio.Future[str] | None = None,
        **options: Any,
    ) -> None:
        """``call`` and ``tools``: what the gateway read when it started the call, if it did;
        ``ended``: given the run's status once its ending is written (the client is answered
        then, not once the run's stream is flushed too)."""
        super().__init__(run_id, **options)
        self._preloaded = (call, tools) if call is not None and tools is not None else None
        self._ended_future = ended

    def _ended(self, status: str) -> None:
        if self._ended_future is not None and not self._ended_future.done():
            self._ended_future.set_result(status)

    async def _opened(self) -> None:
        if self._preloaded is not None:
            self.call, self.tools = self._preloaded
            return
        # The tools are built here, with the call, to save a trip; a failure to build them is
        # the drive's to report (it fails the run, after the chain's checks).
        self.call, self.tools = await db(
            _call_and_tools,
            run_id=self.run_id,
            agent=self.run.agent,
            tools_factory=self.tools_factory or tools_for_agent,
        )

    async def _fresh_messages(self) -> list[dict[str, Any]]:
        return []  # no conversation with a model: the client's call is all the run does

    def _fresh_state(self) -> dict[str, Any]:
        return {"gateway_call": self.call.pk}

    async def _drive(self) -> str:
        run, call = self.run, self.call
        chain, registry = await self._hooks()
        tools = self.tools
        if isinstance(tools, ToolboxError):
            raise RunFailed(f"the agent's tools cannot be built: {tools}", "tools") from None
        facts = {**run_facts(run, chain), "mcp_gateway_id": call.gateway_id}
        step = {"id": call.tool_call_id, "name": call.tool_name, "arguments": call.arguments}
        return await self._run_single_call(step, registry=registry, tools=tools, facts=facts)
