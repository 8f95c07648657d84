"""The ``connector_rate_limit`` hook: N calls per window per connector and per user, counted
atomically (Redis in production, one upsert in the database in embedded mode), and an observation
that says when to retry."""

from __future__ import annotations

import asyncio
import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis
import redis.connection
from django.db import connection

from agents import events as ev
from agents import rate_limit
from agents.models import RateLimitWindow, ToolExecution
from agents.services import run_start
from hooks import HookContext, HookRegistry
from hooks.catalog import build_hooks
from tests.agents.engine_kit import Harness, RecordingTool, events_of
from tests.personas import make_agent, scripted

RETRY = re.compile(r"Retry in (\d+) s \(after \d\d:\d\d:\d\d UTC\)\.")


def limiter(calls: int, window: int = 60, **params: Any) -> HookRegistry:
    spec = {"name": "connector_rate_limit", "params": {"calls": calls, "window_seconds": window, **params}}
    return HookRegistry(build_hooks([spec]))


def ctx(org: int, user: int, tool: str = "oa__purchases_list") -> HookContext:
    return HookContext(tool_name=tool, user_id=user, metadata={"org_id": org})


def unique_org() -> int:
    """Counters outlive a test in Redis: every test counts for an organisation of its own."""
    return random.randrange(10**9, 10**10)


async def allowed(registry: HookRegistry, context: HookContext, times: int) -> list[bool]:
    return [(await registry.run_pre_tool_use(context)).allow for _ in range(times)]


@pytest.fixture(params=["database", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest, settings: Any, transactional_db: None) -> str:
    if request.param == "database":
        settings.REDIS_URL = None
    return request.param


async def test_it_allows_n_calls_then_blocks_saying_when_to_retry(backend: str) -> None:
    registry, org = limiter(3, window=60), unique_org()

    assert await allowed(registry, ctx(org, 1), 3) == [True, True, True]
    out = await registry.run_pre_tool_use(ctx(org, 1))

    assert not out.allow and out.blocked_by == "connector_rate_limit"
    assert out.error.startswith("Rate limit reached: at most 3 call(s) to oa per 60 s for this user.")
    wait = int(RETRY.search(out.error).group(1))
    assert 1 <= wait <= 60


async def test_it_counts_each_user_and_each_connector_apart(backend: str) -> None:
    registry, org = limiter(1), unique_org()

    assert await allowed(registry, ctx(org, 1), 2) == [True, False]
    assert await allowed(registry, ctx(org, 2), 2) == [True, False], "another user has their own count"
    assert await allowed(registry, ctx(org, 1, "crm__contacts"), 1) == [True], "another connector too"
    assert await allowed(registry, ctx(unique_org(), 1), 1) == [True], "and another organisation"


async def test_a_new_window_starts_a_new_count(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    registry, org = limiter(2, window=10), unique_org()
    now = [1_000_000_000.0]
    monkeypatch.setattr(rate_limit.time, "time", lambda: now[0])

    assert await allowed(registry, ctx(org, 1), 3) == [True, True, False]
    out = await registry.run_pre_tool_use(ctx(org, 1))
    assert "Retry in 10 s" in out.error
    now[0] += 9.5
    assert "Retry in 1 s" in (await registry.run_pre_tool_use(ctx(org, 1))).error
    now[0] += 0.5
    assert await allowed(registry, ctx(org, 1), 3) == [True, True, False]


async def test_it_limits_only_the_tools_it_is_declared_for(backend: str) -> None:
    registry, org = limiter(1, tools=["oa__*"]), unique_org()

    assert await allowed(registry, ctx(org, 1, "calculator"), 3) == [True, True, True]
    assert await allowed(registry, ctx(org, 1), 2) == [True, False]


@pytest.mark.redis
async def test_exactly_n_of_5n_concurrent_calls_pass_on_redis(settings: Any) -> None:
    n, org = 20, unique_org()
    registry = limiter(n, window=3600)

    outcomes = await asyncio.gather(*(registry.run_pre_tool_use(ctx(org, 7)) for _ in range(5 * n)))

    assert sum(out.allow for out in outcomes) == n
    assert {out.blocked_by for out in outcomes if not out.allow} == {"connector_rate_limit"}


@pytest.mark.redis
def test_exactly_n_of_5n_calls_from_concurrent_threads_pass_on_redis(settings: Any) -> None:
    n, org = 10, unique_org()
    registry = limiter(n, window=3600)
    start = threading.Barrier(5)

    def worker() -> list[bool]:
        start.wait()
        return asyncio.run(allowed(registry, ctx(org, 8), n))

    with ThreadPoolExecutor(5) as pool:
        results = [flag for chunk in pool.map(lambda _: worker(), range(5)) for flag in chunk]

    assert len(results) == 5 * n and sum(results) == n


@pytest.mark.redis
async def test_each_check_on_redis_is_one_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    """One write to the server per check (the ``INCR`` and ``EXPIRE`` go out together), whether
    the call is allowed or over the limit."""
    registry, org = limiter(2), unique_org()
    await registry.run_pre_tool_use(ctx(unique_org(), 1))  # the pooled connection is open (and greeted)
    sends: list[int] = []
    real = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        sends.append(1)
        real(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)

    assert await allowed(registry, ctx(org, 1), 4) == [True, True, False, False]
    assert len(sends) == 4


async def test_exactly_n_of_5n_concurrent_calls_pass_on_the_database_fallback(
    settings: Any, transactional_db: None
) -> None:
    settings.REDIS_URL = None
    n, org = 10, unique_org()
    registry = limiter(n, window=3600)

    outcomes = await asyncio.gather(*(registry.run_pre_tool_use(ctx(org, 9)) for _ in range(5 * n)))

    assert sum(out.allow for out in outcomes) == n
    assert {out.blocked_by for out in outcomes if not out.allow} == {"connector_rate_limit"}


@pytest.mark.django_db(transaction=True)
def test_exactly_n_of_5n_database_counts_from_concurrent_connections_pass() -> None:
    """The embedded fallback's one statement, from ten connections at once: on SQLite (embedded
    mode) and on PostgreSQL alike every call gets a count of its own."""
    n, key = 10, f"test:{unique_org()}"
    start = threading.Barrier(10)

    def count() -> int:
        try:
            start.wait()
            return rate_limit.count_in_database(key=key, window_start=1_000)
        finally:
            connection.close()

    with ThreadPoolExecutor(10) as pool:
        counts = list(pool.map(lambda _: count(), range(5 * n)))

    assert sorted(counts) == list(range(1, 5 * n + 1)), "every call got its own count"
    assert sum(c <= n for c in counts) == n
    assert RateLimitWindow.objects.get(key=key).count == 5 * n


@pytest.mark.django_db(transaction=True)
def test_the_database_counter_restarts_at_one_in_a_new_window() -> None:
    assert [rate_limit.count_in_database(key="k", window_start=60) for _ in range(3)] == [1, 2, 3]
    assert rate_limit.count_in_database(key="k", window_start=120) == 1
    assert RateLimitWindow.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_rate_limited_call_never_reaches_the_tool_and_the_model_is_told(
    personas, resumes, settings
) -> None:
    settings.REDIS_URL = None
    tool = RecordingTool("oa__purchases_list", parameters={"type": "object"})
    turns = [{"tool_calls": [{"name": "oa__purchases_list", "arguments": {"page": i}}]} for i in range(3)]
    hooks = [{"name": "connector_rate_limit", "params": {"calls": 2, "window_seconds": 3600}}]
    agent = make_agent(
        personas.org, personas.operator, model_config_json=scripted(*turns, {"content": "done"}, hooks=hooks)
    )
    run = run_start(agent=agent, user=personas.member, input="list")

    Harness(tool).execute(run)

    assert tool.calls == [{"page": 0}, {"page": 1}]
    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "connector_rate_limit" and RETRY.search(blocked["error"])
    assert ToolExecution.objects.filter(run=run).count() == 2
