"""What every declared hook shares: a point and a name set per instance, and a tool-name matcher."""

from __future__ import annotations

import fnmatch
import re
from typing import Any, NotRequired, TypedDict

from hooks.contract import Hook, HookContext, HookPoint, OnError

REGEX_PREFIX = "re:"
MCP_ALIAS = "mcp_tool_name"
"""The ``metadata`` key under which the engine states an MCP tool's name in Claude Code's spelling,
``mcp__<connector slug>__<tool>``."""
CLAUDE_MCP_PREFIX = "mcp__"


class Matcher:
    """Which tool names a hook runs for.

    ``""`` or ``"*"``: every tool. ``"re:<pattern>"``: a regular expression that must match the whole
    tool name (``re:oa__purchase_.*|ledger__sql_execute``). Anything else is a glob (``oa__*``,
    ``*__sql_?xecute``), case-sensitive. SessionStart has no tool: a matcher never filters it out.

    A matcher that mentions ``mcp__`` is also read against Claude Code's spelling of an MCP tool's
    name, ``mcp__<connector slug>__<tool>`` (``mcp__records__delete_record``,
    ``re:mcp__records__.*``), which the engine states in the call's ``metadata`` (:data:`MCP_ALIAS`).
    """

    __slots__ = ("_match", "claude_mcp", "text")

    def __init__(self, text: str | None) -> None:
        text = text or ""
        if not isinstance(text, str):
            raise ValueError("matcher must be a string")
        self.text = text
        self.claude_mcp = CLAUDE_MCP_PREFIX in text
        if text in ("", "*"):
            self._match = None
        elif text.startswith(REGEX_PREFIX):
            try:
                self._match = re.compile(text[len(REGEX_PREFIX) :]).fullmatch
            except re.error as exc:
                raise ValueError(f"matcher {text!r} is not a valid regular expression: {exc}") from None
        else:
            self._match = re.compile(fnmatch.translate(text)).fullmatch

    def __call__(self, tool_name: str) -> bool:
        return self._match is None or self._match(tool_name) is not None

    def matches(self, ctx: HookContext) -> bool:
        """Whether the call of ``ctx`` is one this matcher accepts, by its name or, for a matcher
        that mentions ``mcp__``, by its Claude Code spelling."""
        match = self._match
        if match is None or match(ctx.tool_name) is not None:
            return True
        if self.claude_mcp:
            alias = ctx.metadata.get(MCP_ALIAS)
            return isinstance(alias, str) and match(alias) is not None
        return False

    @property
    def matches_all(self) -> bool:
        return self._match is None


def parse_point(value: Any) -> HookPoint:
    try:
        return HookPoint(value)
    except ValueError:
        known = ", ".join(p.value for p in HookPoint)
        raise ValueError(f"point must be one of {known}, not {value!r}") from None


class Declared(TypedDict):
    """What every declared hook (command, http, python) takes from its declaration besides what
    its kind needs: the keyword arguments of :class:`DeclaredHook`."""

    name: str
    point: str | HookPoint
    matcher: NotRequired[str | None]
    priority: NotRequired[int | None]
    timeout: NotRequired[float | None]
    on_error: NotRequired[OnError | None]


class DeclaredHook(Hook):
    """Base of the command and http kinds: ``point`` and ``name`` come from the declaration."""

    kind = ""

    def __init__(
        self,
        *,
        name: str,
        point: str | HookPoint,
        matcher: str | None = None,
        priority: int | None = None,
        timeout: float | None = None,
        on_error: OnError | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("a declared hook needs a name")
        self.name = name  # type: ignore[misc]  # per instance, unlike catalog classes
        self.point = parse_point(point)  # type: ignore[misc]
        self.matcher = Matcher(matcher)
        super().__init__(priority=priority, timeout=timeout, on_error=on_error)

    def should_trigger(self, ctx: HookContext) -> bool:
        return self.point is HookPoint.SESSION_START or self.matcher.matches(ctx)


class MatchedHook(Hook):
    """A catalog or python hook restricted to the tool names its declaration's matcher accepts.
    It delegates everything else to the hook it wraps."""

    def __init__(self, inner: Hook, matcher: Matcher) -> None:
        self.inner = inner
        self.matcher = matcher
        self.point = inner.point  # type: ignore[misc]
        self.name = inner.hook_name  # type: ignore[misc]
        self.priority = inner.priority
        self.timeout = inner.timeout
        self.on_error = inner.on_error
        # An observer of blocked calls (the audit log) stays one behind its matcher.
        self.observes_blocked_calls = inner.observes_blocked_calls  # type: ignore[misc]

    def should_trigger(self, ctx: HookContext) -> Any:
        if self.point is not HookPoint.SESSION_START and not self.matcher.matches(ctx):
            return False
        return self.inner.should_trigger(ctx)

    async def execute(self, ctx: HookContext) -> Any:
        return await self.inner.execute(ctx)

    async def on_blocked(self, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        await self.inner.on_blocked(ctx, blocked_by=blocked_by, error=error)
