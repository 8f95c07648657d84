"""Helpers for driving the engine in tests: in-process tools and a recording provider."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync

from agents.engine.runner import run_execute, run_resume
from agents.llm.factory import provider_for
from agents.models import Run, RunEvent
from agents.tools.base import Tool, ToolSpec


class RecordingTool(Tool):
    """An in-process tool that records every call it receives."""

    def __init__(
        self, name: str, *, result: Any = "ok", requires_confirmation: bool = False, **spec: Any
    ) -> None:
        spec.setdefault("parameters", {"type": "object", "properties": {}})
        self.spec = ToolSpec(name=name, description=name, requires_confirmation=requires_confirmation, **spec)
        self.result = result
        self.calls: list[dict[str, Any]] = []

    async def run(self, args: dict[str, Any]) -> Any:
        self.calls.append(args)
        return self.result(args) if callable(self.result) else self.result


class Harness:
    """Runs the engine in-process with given tools, recording every LLM request."""

    def __init__(self, *tools: Tool) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.llm_requests: list[list[dict[str, Any]]] = []

    def provider(self, config: dict[str, Any]) -> Any:
        real = provider_for(config)
        harness = self

        class Recording(type(real)):  # type: ignore[misc]
            async def complete(self, *, messages: Any, tools: Any, on_delta: Any = None) -> Any:
                harness.llm_requests.append(messages)
                return await real.complete(messages=messages, tools=tools, on_delta=on_delta)

        recording = Recording.__new__(Recording)
        recording.__dict__.update(real.__dict__)
        return recording

    def options(self) -> dict[str, Any]:
        return {"provider_factory": self.provider, "tools_factory": lambda agent: dict(self.tools)}

    def execute(self, run: Run) -> str | None:
        return async_to_sync(run_execute)(run.pk, **self.options())

    def resume(self, run: Run, reason: str = "test") -> str | None:
        return async_to_sync(run_resume)(run.pk, reason=reason, **self.options())


def event_types(run: Run) -> list[str]:
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True))


def events_of(run: Run, type_: str) -> list[dict[str, Any]]:
    return list(
        RunEvent.objects.filter(run=run, type=type_).order_by("seq").values_list("payload", flat=True)
    )
