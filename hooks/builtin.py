"""Built-in hooks. Declarable ones are listed in the catalog by name; ``system`` hooks are attached
to every agent by the engine and cannot be declared or removed."""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

from hooks.catalog import register_hook
from hooks.contract import HookContext, HookResult, PostToolUseHook, PreToolUseHook, SessionStartHook


def _patterns(value: Any, field: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{field} must be a non-empty list of tool-name patterns (e.g. 'oa__*')")
    return tuple(value)


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


@register_hook
class ReadOnlyGuard(PreToolUseHook):
    """Blocks write tools while the organisation is read-only. Attached to every agent."""

    name = "read_only_guard"
    system = True
    priority = 0

    def should_trigger(self, ctx: HookContext) -> bool:
        return bool(ctx.metadata.get("org_read_only")) and bool(ctx.metadata.get("is_write"))

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(
            allow=False,
            error="This organisation is read-only: write actions are disabled. Do not retry.",
            side_effects=[f"blocked write tool {ctx.tool_name} (organisation is read-only)"],
        )


@register_hook
class DenyTools(PreToolUseHook):
    """Blocks the tools whose names match ``tools`` (glob patterns) with ``message``."""

    name = "deny_tools"
    priority = 10

    def __init__(self, *, tools: Any, message: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.tools = _patterns(tools, "tools")
        self.message = message or "This tool is disabled by policy."

    def should_trigger(self, ctx: HookContext) -> bool:
        return _matches(ctx.tool_name, self.tools)

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error=self.message, side_effects=[f"denied {ctx.tool_name}"])


@register_hook
class SetArguments(PreToolUseHook):
    """Forces argument values on matching tools (e.g. a fixed ``currency`` or a capped ``limit``)."""

    name = "set_arguments"
    priority = 20

    def __init__(self, *, tools: Any, values: dict[str, Any], **kw: Any) -> None:
        super().__init__(**kw)
        self.tools = _patterns(tools, "tools")
        if not isinstance(values, dict) or not values:
            raise ValueError("values must be a non-empty object of argument names to values")
        self.values = dict(values)

    def should_trigger(self, ctx: HookContext) -> bool:
        return _matches(ctx.tool_name, self.tools)

    async def execute(self, ctx: HookContext) -> HookResult:
        changed = sorted(k for k, v in self.values.items() if ctx.tool_args.get(k) != v)
        if not changed:
            return HookResult()
        return HookResult(
            modified_args={**ctx.tool_args, **self.values},
            side_effects=[f"set {', '.join(changed)} on {ctx.tool_name}"],
        )


@register_hook
class RedactResult(PostToolUseHook):
    """Replaces every match of ``patterns`` (regular expressions) in a tool's result."""

    name = "redact_result"
    priority = 10

    def __init__(
        self, *, patterns: Any, replacement: str = "[redacted]", tools: Any = "*", **kw: Any
    ) -> None:
        super().__init__(**kw)
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not patterns:
            raise ValueError("patterns must be a non-empty list of regular expressions")
        try:
            self.regexes = tuple(re.compile(p) for p in patterns)
        except re.error as exc:
            raise ValueError(f"bad regular expression: {exc}") from None
        self.replacement = str(replacement)
        self.tools = _patterns(tools, "tools")

    def should_trigger(self, ctx: HookContext) -> bool:
        return _matches(ctx.tool_name, self.tools)

    async def execute(self, ctx: HookContext) -> HookResult:
        text = ctx.tool_result if isinstance(ctx.tool_result, str) else json.dumps(ctx.tool_result)
        count = 0
        for regex in self.regexes:
            text, n = regex.subn(self.replacement, text)
            count += n
        if not count:
            return HookResult()
        return HookResult(
            modified_result=text, side_effects=[f"redacted {count} match(es) in {ctx.tool_name}"]
        )


@register_hook
class TruncateResult(PostToolUseHook):
    """Cuts long observations to ``max_chars`` so one tool cannot flood the context."""

    name = "truncate_result"
    priority = 90

    def __init__(self, *, max_chars: int = 4000, **kw: Any) -> None:
        super().__init__(**kw)
        if not isinstance(max_chars, int) or max_chars < 100:
            raise ValueError("max_chars must be a whole number of at least 100")
        self.max_chars = max_chars

    async def execute(self, ctx: HookContext) -> HookResult:
        text = ctx.tool_result if isinstance(ctx.tool_result, str) else json.dumps(ctx.tool_result)
        if len(text) <= self.max_chars:
            return HookResult()
        cut = len(text) - self.max_chars
        return HookResult(
            modified_result=f"{text[: self.max_chars]}… [{cut} more characters cut]",
            side_effects=[f"truncated {ctx.tool_name} result by {cut} characters"],
        )


@register_hook
class StaticContext(SessionStartHook):
    """Adds a fixed piece of text to the system prompt of every run (house rules, glossary)."""

    name = "static_context"

    def __init__(self, *, text: str, **kw: Any) -> None:
        super().__init__(**kw)
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty string")
        self.text = text.strip()

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(additional_context=self.text)
