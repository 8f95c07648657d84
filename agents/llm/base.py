"""The LLM provider interface used by the engines.

Messages are OpenAI chat-format dicts (``{"role": "system"|"user"|"assistant"|"tool", …}``) so a
run's checkpoint can hold them as plain JSON. Tools are offered as OpenAI function specs.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

DeltaCallback = Callable[[str], Awaitable[None]]


class LLMError(Exception):
    """The provider could not produce an answer (after its retries). ``str()`` is user-facing."""


class LLMConfigError(LLMError):
    """The agent's model configuration is unusable (unknown provider, missing key, bad script)."""


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] | None
    """Parsed arguments, or ``None`` when the model sent text that is not a JSON object."""
    raw_arguments: str = ""

    def as_message_part(self) -> dict[str, Any]:
        import json

        raw = self.raw_arguments or json.dumps(self.arguments or {}, sort_keys=True)
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": raw}}


@dataclass(slots=True)
class LLMResponse:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)

    def as_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [call.as_message_part() for call in self.tool_calls]
        return message


class LLMProvider(abc.ABC):
    """One chat completion per call. Implementations stream text through ``on_delta``."""

    name: str = ""

    @abc.abstractmethod
    async def complete(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Return the assistant's answer: text and/or native tool calls.

        Raises :class:`LLMError` with a clear message when no answer can be had.
        """
