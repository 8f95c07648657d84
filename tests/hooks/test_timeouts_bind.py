"""Timeouts bind, whatever the hook does (docs/design.md §1.1).

Python hooks run in hook threads: one that blocks is cut off at its timeout and never stalls the
event loop. In-process hooks run on the loop and cannot be interrupted, but one that answers after
its timeout has timed out all the same. Time margins are wide on purpose: a blocking example blocks
for 2 s against a 0.2 s timeout, and the tests only tell "on time" from "after the block".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from hooks import (
    HookContext,
    HookRegistry,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
)
from hooks.catalog import build_item
from hooks.kinds import offloop
from hooks.kinds.offloop import HookThreads
from tests.hooks.declared_examples import CANCELLED, RELEASE

pytestmark = pytest.mark.once  # subprocesses and pure code: one stack is enough (pyproject.toml)

PAY = {"purchase_id": "PO-1001", "amount": 1250}
ON_TIME = 1.0  # a 0.2 s timeout against a 2 s block: well clear of both


def ctx() -> HookContext:
    return HookContext(tool_name="oa__purchase_pay", tool_args=dict(PAY), metadata={"run_id": 42})


def python(path: str, *, point: str = "PreToolUse", timeout: float = 0.2, **fields: Any):
    return build_item(
        {
            "kind": "python",
            "name": path,
            "point": point,
            "timeout": timeout,
            "params": {"path": f"tests.hooks.declared_examples.{path}", **fields.pop("params", {})},
            **fields,
        }
    )


def pool_of(**bounds: int) -> HookThreads:
    return HookThreads(**{"size": 4, "runaways": 4, "runaways_per_hook": 2, **bounds})


@pytest.fixture(autouse=True)
def threads(monkeypatch) -> Iterator[Callable[..., HookThreads]]:
    """Each test gets its own pool (``threads(size=…)`` for other bounds); blocked examples are
    released and every thread ended when it finishes."""
    made: list[HookThreads] = []

    def use(**bounds: int) -> HookThreads:
        made.append(pool_of(**bounds))
        monkeypatch.setattr(offloop, "_pool", made[-1])
        return made[-1]

    use()
    RELEASE.clear()
    CANCELLED.clear()
    yield use
    RELEASE.set()
    for pool in made:
        assert pool.shutdown(wait=5), "a hook thread outlived its test"


@contextlib.asynccontextmanager
async def longest_stall() -> AsyncIterator[Callable[[], float]]:
    """The longest the event loop went without running a ticker coroutine, meanwhile."""
    gaps = [0.0]

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps[0] = max(gaps[0], now - last)
            last = now

    task = asyncio.create_task(tick())
    await asyncio.sleep(0.02)
    try:
        yield lambda: gaps[0]
    finally:
        await asyncio.sleep(0.05)  # one more tick, so a stall at the very end is counted
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def timed(coro: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = await coro
    return out, time.perf_counter() - start


def failures(out: Any) -> list[str]:
    return [e.message for e in out.side_effects if e.failure]


# --- python hooks run in hook threads --------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("blocks_the_loop", "blocks_the_loop"),
        ("blocks", "blocks"),
        ("BlockingExecute", "blocking_execute"),
        ("BlockingFilter", "blocking_filter"),
    ],
    ids=["async-def", "def", "class-execute", "class-should_trigger"],
)
async def test_a_python_hook_that_blocks_past_its_timeout_is_blocked_on_time_and_named(path, name) -> None:
    registry = HookRegistry([python(path)])

    async with longest_stall() as stall:
        out, elapsed = await timed(registry.run_pre_tool_use(ctx()))

    assert not out.allow and out.blocked_by == name
    assert f"hook {name} timed out after 0.2 s" in failures(out)
    assert elapsed < ON_TIME
    assert stall() < 0.5, "the event loop was not stalled while the hook blocked"


async def test_a_python_hook_that_blocks_stalls_no_other_run_of_the_process() -> None:
    slow = HookRegistry([python("sleeps_a_second", timeout=5)])
    quick = HookRegistry([python("answers_at_once")])

    async with longest_stall() as stall:
        slow_call = asyncio.create_task(slow.run_pre_tool_use(ctx()))
        await asyncio.sleep(0.05)
        other, other_took = await timed(quick.run_pre_tool_use(ctx()))
        out = await slow_call

    assert other.allow and other_took < 0.5, "another run went on while the slow hook slept"
    assert out.allow, "the slow hook ran to its end, within its timeout"
    assert stall() < 0.5


async def test_a_python_hook_that_keeps_the_cpu_busy_does_not_stall_the_loop() -> None:
    registry = HookRegistry([python("spins", timeout=5)])

    async with longest_stall() as stall:
        out = await registry.run_pre_tool_use(ctx())

    assert out.allow
    assert stall() < 0.5


async def test_a_plain_function_runs_in_a_hook_thread_and_an_unmatched_hook_takes_none(threads) -> None:
    pool = threads()
    unmatched = python("BlockingExecute", matcher="crm__*")  # its matcher is checked on the loop

    out, elapsed = await timed(HookRegistry([python("not_async"), unmatched]).run_pre_tool_use(ctx()))

    assert out.allow and elapsed < ON_TIME
    [note] = [e.message for e in out.side_effects]
    assert note.startswith("ran in hook-thread-")
    assert pool.stats()["threads"] == 1


async def test_a_python_coroutine_past_its_timeout_is_cancelled_in_its_thread() -> None:
    out = await HookRegistry([python("cancelled_when_written_off")]).run_pre_tool_use(ctx())

    assert not out.allow
    assert CANCELLED.wait(ON_TIME), "the written-off coroutine was cancelled, freeing its thread"


async def test_a_python_hook_cannot_change_the_call_in_place_only_through_its_result() -> None:
    call = ctx()

    out = await HookRegistry([python("rewrites_in_place")]).run_pre_tool_use(call)

    assert out.allow and out.tool_args == PAY
    assert call.tool_args == PAY and call.metadata == {"run_id": 42}


class Refuses(PreToolUseHook):
    name = "refuses"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error="No.")


async def test_a_python_observer_of_blocked_calls_that_blocks_is_cut_off_and_named() -> None:
    observer = python("BlockingObserver", point="PostToolUse")
    registry = HookRegistry([Refuses(), observer])

    out, elapsed = await timed(registry.run_pre_tool_use(ctx()))

    assert not out.allow and out.blocked_by == "refuses"
    assert "hook blocking_observer timed out after 0.2 s" in failures(out)
    assert elapsed < ON_TIME


# --- runaways cannot exhaust the pool --------------------------------------------------------------


async def wait_for(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.01)


async def test_a_hook_stuck_past_its_timeout_holds_no_more_threads_than_its_share(threads) -> None:
    pool = threads(size=1, runaways=1, runaways_per_hook=1)
    stuck, other = HookRegistry([python("blocks_the_loop")]), HookRegistry([python("answers_at_once")])

    first = await stuck.run_pre_tool_use(ctx())
    assert not first.allow and pool.stats()["runaways"] == 1

    # Its thread is written off and replaced: other hooks still run at once.
    out, elapsed = await timed(other.run_pre_tool_use(ctx()))
    assert out.allow and elapsed < ON_TIME

    # The same hook is refused at once while its earlier call still runs.
    again, elapsed = await timed(stuck.run_pre_tool_use(ctx()))
    assert not again.allow and elapsed < ON_TIME
    assert failures(again) == [
        "hook blocks_the_loop was not started: 1 of its calls are still running past their timeout"
    ]

    # Once that call returns, its thread leaves (the replacement stays) and the hook runs again.
    RELEASE.set()
    await wait_for(lambda: pool.stats() == {"threads": 1, "idle": 1, "runaways": 0})
    assert (await stuck.run_pre_tool_use(ctx())).allow


async def test_past_the_allowance_of_runaways_calls_wait_and_fail_closed_at_their_timeout(threads) -> None:
    pool = threads(size=1, runaways=0, runaways_per_hook=1)
    await HookRegistry([python("blocks_the_loop")]).run_pre_tool_use(ctx())

    out, elapsed = await timed(HookRegistry([python("answers_at_once")]).run_pre_tool_use(ctx()))

    assert not out.allow and failures(out) == ["hook answers_at_once timed out after 0.2 s"]
    assert elapsed < ON_TIME
    assert pool.stats()["threads"] == 1, "no thread beyond the bounds"


def test_a_forked_worker_process_builds_its_own_hook_threads(threads) -> None:
    threads()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its parent's threads did not come along
        os.write(write, b"fresh" if offloop._pool is None else b"inherited")
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as answer:
        assert answer.read() == b"fresh"


# --- in-process hooks: a late answer is a timeout --------------------------------------------------


def block_the_loop(seconds: float) -> None:
    """What a careless in-process hook does: block the thread (the loop) without suspending."""
    time.sleep(seconds)


class LatePre(PreToolUseHook):
    """An in-process hook that blocks the loop, then answers (too late)."""

    name = "late_pre"
    timeout = 0.1

    async def execute(self, ctx: HookContext) -> HookResult:
        block_the_loop(0.6)
        return HookResult(modified_args={"amount": 1}, side_effects=["checked"])


class LatePost(PostToolUseHook):
    name = "late_post"
    timeout = 0.1

    async def execute(self, ctx: HookContext) -> HookResult:
        block_the_loop(0.6)
        return HookResult(modified_result="redacted")


class LateStart(SessionStartHook):
    name = "late_start"
    timeout = 0.1

    async def execute(self, ctx: HookContext) -> HookResult:
        block_the_loop(0.6)
        return HookResult(additional_context="Be brief.")


async def test_an_in_process_pre_hook_that_answers_after_its_timeout_blocks_the_call() -> None:
    out = await HookRegistry([LatePre()]).run_pre_tool_use(ctx())

    assert not out.allow and out.blocked_by == "late_pre"
    assert out.tool_args == PAY, "its answer is ignored"
    [note] = [e.message for e in out.side_effects]
    assert note.startswith("hook late_pre timed out after 0.1 s (it ran for ")


async def test_an_in_process_post_hook_that_answers_after_its_timeout_withholds_the_result() -> None:
    call = ctx()
    call.tool_result = "card 4111 1111 1111 1111"

    out = await HookRegistry([LatePost()]).run_post_tool_use(call)

    assert out.failed_hooks == ["late_post"]
    assert "could not complete" in out.result and "4111" not in out.result
    assert failures(out)[0].startswith("hook late_post timed out after 0.1 s")


async def test_an_in_process_session_hook_that_answers_after_its_timeout_stops_the_run() -> None:
    out = await HookRegistry([LateStart()]).run_session_start(HookContext())

    assert not out.ok and out.failed_by == "late_start"
    assert out.additional_context == []
    assert "timed out after 0.1 s" in out.error


class SlowFilter(PreToolUseHook):
    name = "slow_filter"
    timeout = 0.1

    def should_trigger(self, ctx: HookContext) -> bool:
        block_the_loop(0.6)
        return False

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


class SlowAsyncFilter(PreToolUseHook):
    name = "slow_async_filter"
    timeout = 0.1

    async def should_trigger(self, ctx: HookContext) -> bool:  # type: ignore[override]
        block_the_loop(0.6)
        return True

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


@pytest.mark.parametrize("hook_cls", [SlowFilter, SlowAsyncFilter], ids=["def", "async-def"])
async def test_the_time_should_trigger_takes_counts_toward_the_timeout(hook_cls) -> None:
    out = await HookRegistry([hook_cls()]).run_pre_tool_use(ctx())

    assert not out.allow and out.blocked_by == hook_cls.name
    assert failures(out)[0].startswith(f"hook {hook_cls.name} timed out after 0.1 s")


class SlowFilterThenWaits(PreToolUseHook):
    name = "filter_then_wait"
    timeout = 1.0

    def should_trigger(self, ctx: HookContext) -> bool:
        time.sleep(0.9)
        return True

    async def execute(self, ctx: HookContext) -> HookResult:
        await asyncio.sleep(10)
        return HookResult()


async def test_a_hook_that_suspends_gets_only_what_is_left_of_its_timeout() -> None:
    out, elapsed = await timed(HookRegistry([SlowFilterThenWaits()]).run_pre_tool_use(ctx()))

    assert not out.allow and failures(out) == ["hook filter_then_wait timed out after 1 s"]
    assert elapsed < 1.5, "cut off at 1 s in all, not 1 s after should_trigger's 0.9 s"


async def test_on_error_allow_lets_a_late_hook_through_and_still_names_it() -> None:
    out = await HookRegistry([LatePre(on_error="allow")]).run_pre_tool_use(ctx())

    assert out.allow and out.tool_args == PAY
    assert failures(out)[0].startswith("hook late_pre timed out after 0.1 s")


class AsksHumans(PreToolUseHook):
    """Stands for the approval gate: a hook that asks humans, here lenient on errors."""

    name = "asks_humans"
    asks_humans = True
    on_error = "allow"
    timeout = 0.1

    def __init__(self, fails_by: str) -> None:
        super().__init__()
        self.fails_by = fails_by

    async def execute(self, ctx: HookContext) -> HookResult:
        if self.fails_by == "raising":
            raise RuntimeError("the inbox is down")
        await asyncio.sleep(5)
        return HookResult()


@pytest.mark.parametrize(("fails_by", "allowed"), [("raising", True), ("timing out", False)])
async def test_a_timeout_never_counts_as_allow_for_a_hook_that_asks_humans(fails_by, allowed) -> None:
    out = await HookRegistry([AsksHumans(fails_by)]).run_pre_tool_use(ctx())

    assert out.allow is allowed


class LateObserver(PostToolUseHook):
    name = "late_observer"
    observes_blocked_calls = True
    timeout = 0.1

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()

    async def on_blocked(self, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        block_the_loop(0.6)


async def test_an_in_process_observer_that_answers_after_its_timeout_is_named() -> None:
    out = await HookRegistry([Refuses(), LateObserver()]).run_pre_tool_use(ctx())

    assert not out.allow and out.blocked_by == "refuses"
    assert failures(out)[0].startswith("hook late_observer timed out after 0.1 s")
