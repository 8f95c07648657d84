"""The ``connector_rate_limit`` hook: N calls per sliding window per connector and per user,
counted atomically (fimone/rates.py: Redis in production, the process's memory in embedded mode),
and an observation that says when to retry."""

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

from agents import events as ev
from agents.models import ToolExecution
from agents.services import run_start
from hooks import HookContext, HookRegistry
from hooks.catalog import build_hooks
from tests.agents.engine_kit import Harness, RecordingTool, events_of
from tests.conftest import RateClock
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


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request: pytest.FixtureRequest, settings: Any) -> str:
    if request.param == "memory":
        settings.REDIS_URL = None
    return request.param


def wait_of(error: str) -> int:
    return int(RETRY.search(error).group(1))


async def test_it_allows_n_calls_then_blocks_saying_when_to_retry(backend: str) -> None:
    registry, org = limiter(3, window=60), unique_org()

    assert await allowed(registry, ctx(org, 1), 3) == [True, True, True]
    out = await registry.run_pre_tool_use(ctx(org, 1))

    assert not out.allow and out.blocked_by == "connector_rate_limit"
    assert out.error.startswith("Rate limit reached: at most 3 call(s) to oa per 60 s for this user.")
    assert 1 <= wait_of(out.error) <= 60


async def test_it_counts_each_user_and_each_connector_apart(backend: str) -> None:
    registry, org = limiter(1), unique_org()

    assert await allowed(registry, ctx(org, 1), 2) == [True, False]
    assert await allowed(registry, ctx(org, 2), 2) == [True, False], "another user has their own count"
    assert await allowed(registry, ctx(org, 1, "crm__contacts"), 1) == [True], "another connector too"
    assert await allowed(registry, ctx(unique_org(), 1), 1) == [True], "and another organisation"


async def test_a_blocked_call_may_pass_once_the_wait_it_was_told_has_passed(
    backend: str, rate_clock: RateClock
) -> None:
    """A two-second window: two calls, the third blocked until the time it was told, and the
    blocked calls in between are not counted (they do not push that time back)."""
    registry, org = limiter(2, window=2), unique_org()

    assert await allowed(registry, ctx(org, 1), 3) == [True, True, False]
    wait = wait_of((await registry.run_pre_tool_use(ctx(org, 1))).error)
    assert 1 <= wait <= 2
    rate_clock.pass_(wait)

    assert await allowed(registry, ctx(org, 1), 1) == [True]


async def test_a_whole_window_later_every_call_of_the_rate_passes_again(
    backend: str, rate_clock: RateClock
) -> None:
    registry, org = limiter(2, window=1), unique_org()
    assert await allowed(registry, ctx(org, 1), 3) == [True, True, False]

    rate_clock.pass_(2)  # the calls' window, and the one after it over which they weigh less and less

    assert await allowed(registry, ctx(org, 1), 3) == [True, True, False]


async def test_it_limits_only_the_tools_it_is_declared_for(backend: str) -> None:
    registry, org = limiter(1, tools=["oa__*"]), unique_org()

    assert await allowed(registry, ctx(org, 1, "calculator"), 3) == [True, True, True]
    assert await allowed(registry, ctx(org, 1), 2) == [True, False]


async def test_exactly_n_of_5n_concurrent_calls_pass(backend: str) -> None:
    n, org = 20, unique_org()
    registry = limiter(n, window=3600)

    outcomes = await asyncio.gather(*(registry.run_pre_tool_use(ctx(org, 7)) for _ in range(5 * n)))

    assert sum(out.allow for out in outcomes) == n
    assert {out.blocked_by for out in outcomes if not out.allow} == {"connector_rate_limit"}


def test_exactly_n_of_5n_calls_from_concurrent_threads_pass(backend: str) -> None:
    """Threads with event loops of their own, as runs in embedded mode and Celery workers have."""
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
async def test_a_call_on_redis_is_one_round_trip_and_a_blocked_one_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One write to the server per allowed call (one script counts it), and two per blocked call
    (the count, then when to retry)."""
    registry, org = limiter(2), unique_org()
    await allowed(registry, ctx(unique_org(), 1), 3)  # the pooled connection is open, the scripts loaded
    sends: list[int] = []
    real = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        sends.append(1)
        real(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)

    assert await allowed(registry, ctx(org, 1), 4) == [True, True, False, False]
    assert len(sends) == 2 * 1 + 2 * 2


async def test_a_counter_that_cannot_be_reached_blocks_the_call(settings: Any) -> None:
    """Fails closed, like any hook that cannot complete."""
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens there: the connection is refused

    out = await limiter(5).run_pre_tool_use(ctx(unique_org(), 1))

    assert not out.allow and out.blocked_by == "connector_rate_limit"
    assert out.error == "Tool call blocked: the safety check 'connector_rate_limit' could not complete."


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
