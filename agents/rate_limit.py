"""The ``connector_rate_limit`` hook: at most ``calls`` calls per ``window_seconds`` per connector
and per user, counted atomically across every process.

Counted with :mod:`fimone.rates` (the throttles' counters): a sliding window of ``window_seconds``
(the previous window's calls, weighted by the share of it still inside the last
``window_seconds``, plus the current window's), one counter per (organisation, connector, user,
rate). With ``REDIS_URL`` (production) it lives in Redis, shared by every process, one round trip
per call; without it (embedded mode, one process) in the process's memory. The count runs in a
worker thread on a process-wide Redis client, not an asyncio one: those belong to the event loop
that opened them, and a Celery task runs each run in a new loop.

A call over the limit is blocked, and not counted, with an observation saying when a call will be
allowed again (seconds and UTC time), so the model can tell the user when to retry. A counter that
cannot be reached fails closed like any hook. The connector is the tool name's prefix (``oa`` of
``oa__purchase_pay``); a built-in tool counts as its own.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any, ClassVar

from fimone import rates
from hooks.builtin import TOOL_PATTERNS_SCHEMA, tool_matches, tool_patterns
from hooks.catalog import register_hook
from hooks.contract import HookContext, HookResult, PreToolUseHook


@register_hook
class ConnectorRateLimit(PreToolUseHook):
    """Blocks a user's calls to one connector past ``calls`` per ``window_seconds``."""

    name = "connector_rate_limit"
    description = "At most N calls per window per connector and per user; says when to retry."
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "calls": {"type": "integer", "minimum": 1, "description": "Calls allowed per window."},
            "window_seconds": {"type": "integer", "minimum": 1, "maximum": 86_400, "default": 60},
            "tools": TOOL_PATTERNS_SCHEMA,
        },
        "required": ["calls"],
        "additionalProperties": False,
    }
    priority = 5

    def __init__(self, *, calls: int, window_seconds: int = 60, tools: Any = "*", **kw: Any) -> None:
        super().__init__(**kw)
        for label, value in (("calls", calls), ("window_seconds", window_seconds)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{label} must be a whole number of at least 1")
        self.calls = calls
        self.window_seconds = window_seconds
        self.tools = tool_patterns(tools, "tools")

    def should_trigger(self, ctx: HookContext) -> bool:
        return tool_matches(ctx.tool_name, self.tools)

    async def execute(self, ctx: HookContext) -> HookResult:
        connector = ctx.tool_name.partition("__")[0]
        item = rates.rate(self.calls, self.window_seconds)
        who = ("connector_rate_limit", str(ctx.metadata.get("org_id")), connector, str(ctx.user_id))

        def count() -> int | None:  # None when counted, else the seconds until a call may pass
            return None if rates.hit(item, *who) else rates.retry_after(item, *who)

        wait = await asyncio.to_thread(count)
        if wait is None:
            return HookResult()
        at = dt.datetime.fromtimestamp(time.time() + wait, tz=dt.UTC).strftime("%H:%M:%S UTC")
        return HookResult(
            allow=False,
            error=(
                f"Rate limit reached: at most {self.calls} call(s) to {connector} per "
                f"{self.window_seconds} s for this user. Retry in {wait} s (after {at})."
            ),
            side_effects=[f"rate limited {ctx.tool_name} ({self.calls} calls per {self.window_seconds} s)"],
        )
