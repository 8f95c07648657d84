"""What a tool is to the engine: a spec the LLM sees and an async ``run``."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any


class ToolError(Exception):
    """A failure the LLM should read as the observation (HTTP 4xx/5xx, SQL error, bad input).

    ``str()`` is the observation text: clear, short, no traceback.
    """


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    requires_confirmation: bool = False
    is_write: bool = False

    def as_openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class Tool(abc.ABC):
    spec: ToolSpec

    @property
    def name(self) -> str:
        return self.spec.name

    @abc.abstractmethod
    async def run(self, args: dict[str, Any]) -> Any:
        """Execute with validated arguments; return a JSON-serialisable result.

        Raise :class:`ToolError` for failures the LLM should be told about.
        """
