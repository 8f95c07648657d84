"""The eval runner's engine: the agent's own ReAct engine with no hooks and no real side effects.

An eval run's recorded chain is empty (``BYPASSED_CHAIN``: no declared hooks, no system hooks, no
gate). Whatever needs a human's approval — a tool marked ``requires_confirmation``, or every tool
of an agent that confirms everything — is swapped for a :class:`DryRunTool`: the model reads an
observation naming the tool and the arguments, and nothing is sent anywhere (DESIGN §1.2).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents import events as ev
from agents.engine.react import ReactEngine
from agents.llm.base import LLMProvider
from agents.models import Agent
from agents.tools.base import Tool, ToolSpec
from agents.tools.toolbox import tools_for_agent
from hooks.catalog import CHAIN_VERSION

BYPASS_NOTE = (
    "hooks bypassed by the eval runner: no hook ran; tools that require confirmation were not executed"
)


def bypassed_chain(*, agent: Agent) -> dict[str, Any]:
    """The chain an eval run keeps: empty, and saying why."""
    return {
        "v": CHAIN_VERSION,
        "declared": [],
        "system": [],
        "require_confirmation_for_all": bool(agent.require_confirmation_for_all),
        "bypassed": BYPASS_NOTE,
    }


class DryRunTool(Tool):
    """Stands for a tool that needs a human's approval: it answers what would have run."""

    def __init__(self, tool: Tool) -> None:
        # Same name, description and parameters for the model; no approval to wait for.
        self.spec = ToolSpec(
            name=tool.spec.name,
            description=tool.spec.description,
            parameters=tool.spec.parameters,
            requires_confirmation=False,
            is_write=tool.spec.is_write,
        )

    async def run(self, args: dict[str, Any]) -> Any:
        arguments = json.dumps(args, ensure_ascii=False, sort_keys=True)
        return (
            f"Dry run (eval): {self.spec.name} requires confirmation and was not executed. "
            f"It would have been called with {arguments}."
        )


def dry_run_tools(
    base: Callable[..., dict[str, Tool]],
) -> Callable[..., dict[str, Tool]]:
    """A tools factory answering ``base``'s tools, those that need approval replaced."""

    def factory(*, agent: Agent) -> dict[str, Tool]:
        tools = base(agent=agent)
        confirm_all = bool(agent.require_confirmation_for_all)
        return {
            name: DryRunTool(tool) if confirm_all or tool.spec.requires_confirmation else tool
            for name, tool in tools.items()
        }

    return factory


class EvalEngine(ReactEngine):
    """The ReAct engine on the eval run's empty chain and dry-run tools; the bypass is noted in
    the run's trace before anything else it does."""

    def __init__(
        self,
        run_id: int,
        *,
        owner: str,
        tools_factory: Callable[..., dict[str, Tool]] | None = None,
        provider_factory: Callable[[dict[str, Any]], LLMProvider] | None = None,
    ) -> None:
        options: dict[str, Any] = {"tools_factory": dry_run_tools(tools_factory or tools_for_agent)}
        if provider_factory is not None:
            options["provider_factory"] = provider_factory
        super().__init__(run_id, owner=owner, **options)

    async def _prepare(self) -> Any:
        prepared = await super()._prepare()
        self.journal.emit(
            ev.HOOK_SIDE_EFFECT,
            {
                "tool_call_id": None,
                "hook": "eval_runner",
                "point": "SessionStart",
                "message": BYPASS_NOTE,
                "failure": False,
            },
        )
        return prepared
