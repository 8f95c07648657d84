"""The ``connector_rate_limit`` hook: at most ``calls`` calls per ``window_seconds`` per connector
and per user, counted atomically across every process.

Counting is a fixed window (``floor(now / window)``), one counter per (organisation, connector,
user, window):

* with ``REDIS_URL`` (production) the counter lives in Redis: one round trip per call, an
  ``INCR`` and an ``EXPIRE`` sent together in a ``MULTI`` transaction, so concurrent calls from any
  number of servers are counted exactly;
* without it (embedded mode) the counter is a :class:`agents.models.RateLimitWindow` row, counted by
  one ``INSERT … ON CONFLICT DO UPDATE … RETURNING`` statement (atomic on SQLite and PostgreSQL).

A call over the limit is blocked with an observation saying when the window ends (seconds and UTC
time), so the model can tell the user when to retry; it is still counted, so hammering does not
shorten the wait. A counter that cannot be reached fails closed like any hook. The connector is
the tool name's prefix (``oa`` of ``oa__purchase_pay``); a built-in tool counts as its own.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
from typing import Any, ClassVar

from django.conf import settings
from django.db import connection

from agents.engine.db import db
from agents.models import RateLimitWindow
from hooks.builtin import TOOL_PATTERNS_SCHEMA, tool_matches, tool_patterns
from hooks.catalog import register_hook
from hooks.contract import HookContext, HookResult, PreToolUseHook

KEY_PREFIX = "fimone:ratelimit"

# One process-wide client (its connection pool is thread-safe). Not an asyncio client: those
# belong to the event loop that opened them, and a Celery task runs each run in a new loop.
_CLIENT: dict[str, Any] = {}


def _redis() -> Any:
    import redis

    url = settings.REDIS_URL
    client = _CLIENT.get(url)
    if client is None:
        client = _CLIENT[url] = redis.Redis.from_url(url)
    return client


def _count_in_redis(key: str, window_seconds: int) -> int:
    with _redis().pipeline(transaction=True) as pipe:
        pipe.incr(key)
        pipe.expire(key, window_seconds + 1)
        count, _ = pipe.execute()
    return int(count)


async def count_in_redis(*, key: str, window_seconds: int) -> int:
    """Count one call in ``key`` (a key per window) and return the window's count so far: an
    ``INCR`` and an ``EXPIRE`` in one ``MULTI`` transaction, one round trip."""
    return await asyncio.to_thread(_count_in_redis, key, window_seconds)


def count_in_database(*, key: str, window_start: int) -> int:
    """Count one call for ``key`` in the window that began at ``window_start``; one statement."""
    q = connection.ops.quote_name
    table, key_, start_, count_ = (q(RateLimitWindow._meta.db_table), q("key"), q("window_start"), q("count"))
    # Names come from the model, values are parameters.
    sql = (
        f"INSERT INTO {table} ({key_}, {start_}, {count_}) VALUES (%s, %s, 1) "  # noqa: S608
        f"ON CONFLICT ({key_}) DO UPDATE SET "
        f"{count_} = CASE WHEN {table}.{start_} = excluded.{start_} THEN {table}.{count_} + 1 ELSE 1 END, "
        f"{start_} = excluded.{start_} "
        f"RETURNING {count_}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [key, window_start])
        return int(cursor.fetchone()[0])


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
        now = time.time()
        window = int(now // self.window_seconds)
        start = window * self.window_seconds
        who = f"{ctx.metadata.get('org_id')}:{connector}:{ctx.user_id}"
        if settings.REDIS_URL:
            key = f"{KEY_PREFIX}:{who}:{window}"
            count = await count_in_redis(key=key, window_seconds=self.window_seconds)
        else:
            count = await db(count_in_database, key=f"{KEY_PREFIX}:{who}", window_start=start)
        if count <= self.calls:
            return HookResult()
        ends = start + self.window_seconds
        wait = max(1, math.ceil(ends - now))
        at = dt.datetime.fromtimestamp(ends, tz=dt.UTC).strftime("%H:%M:%S UTC")
        return HookResult(
            allow=False,
            error=(
                f"Rate limit reached: at most {self.calls} call(s) to {connector} per "
                f"{self.window_seconds} s for this user. Retry in {wait} s (after {at})."
            ),
            side_effects=[f"rate limited {ctx.tool_name} ({count} calls in the window)"],
        )
