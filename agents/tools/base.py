"""What a tool is to the engine: a spec the LLM sees and an async ``run``."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


class ToolError(Exception):
    """A failure the LLM should read as the observation (HTTP 4xx/5xx, SQL error, bad input).

    ``str()`` is the observation text: clear, short, no traceback.
    """


class OutcomeUnknown(ToolError):
    """The call reached the service, which never said how it ended (it disconnected, or did not
    answer in time): it may have taken effect. The pipeline records the execution ``unknown`` and
    never runs it again (docs/design.md §1.5). ``str()`` says what happened."""


def readable_tool_name(name: str) -> str:
    """A tool's internal name as people read it when it has no title: ``oa__purchase_pay`` →
    "Purchase pay" (the connector's prefix is an operator's concern)."""
    words = name.rpartition("__")[2].replace("_", " ").replace("-", " ").split()
    text = " ".join(words) or name
    return text[:1].upper() + text[1:]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    requires_confirmation: bool = False
    is_write: bool = False
    #: what people read for the tool (the model reads ``name`` and ``description``); empty: the
    #: name made readable (:attr:`display`)
    title: str = ""

    @property
    def display(self) -> str:
        """The tool as people read it: its title, else its name made readable."""
        return self.title or readable_tool_name(self.name)

    def as_openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class Tool(abc.ABC):
    spec: ToolSpec
    #: whether a call may reach anything outside this process (a service, a database): an eval
    #: answers such a call with a dry run unless its set calls the tool live (docs/design.md §1.2)
    reaches_outside: bool = True
    #: whether a call in flight is stopped when its run is cancelled (an MCP call: the server is
    #: told to cancel, and the outcome is unknown). Other tools finish the call they started.
    stops_on_cancel: bool = False
    #: facts every hook of a call of this tool sees in ``metadata`` (an MCP tool: its name in
    #: Claude Code's spelling, ``mcp_tool_name``)
    call_facts: dict[str, Any] = {}  # read only: a tool with facts sets its own

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def reads_only(self) -> bool:
        """Whether a call of this tool only reads (an eval set may then call it live). Nothing is
        a read unless its tool says so."""
        return False

    @abc.abstractmethod
    async def run(self, args: dict[str, Any]) -> Any:
        """Execute with validated arguments; return a JSON-serialisable result.

        Raise :class:`ToolError` for failures the LLM should be told about.
        """


@dataclass(frozen=True, slots=True)
class ToolSuspension:
    """What a :class:`ReentrantTool` returns when its call cannot finish yet (a delegate agent
    waits for an approval): the run parks on the call, and re-enters it when woken."""

    reason: str
    detail: dict[str, Any] = field(default_factory=dict)
    still_waiting: Callable[[], Awaitable[bool]] | None = None


class ReentrantTool(Tool):
    """A tool whose one call may span several drives of the run (``call_agent``).

    Its effects are keyed by the call's id, so entering the call again (after a suspension or a
    crash) continues the same work instead of starting it anew; the pipeline then re-enters a
    call whose execution is recorded as started rather than reporting its outcome unknown.
    """

    async def run(self, args: dict[str, Any]) -> Any:
        raise ToolError(f"{self.name} can only run as a call of a run")

    @abc.abstractmethod
    async def run_call(self, args: dict[str, Any], *, call_id: str) -> Any:
        """Like :meth:`Tool.run` for the call ``call_id``; may return a :class:`ToolSuspension`."""
