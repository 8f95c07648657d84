"""Hooks that python declarations name in the tests (``tests.hooks.declared_examples.…``)."""

from __future__ import annotations

import asyncio
import threading
import time

from hooks import HookContext, HookResult, PostToolUseHook, PreToolUseHook

PAY_LIMIT = 1000  # not a hook: a declaration naming it is refused

#: What the blocking examples below wait for (2 s at most): tests set it when they end, so no
#: hook thread is left blocking behind them.
RELEASE = threading.Event()
#: Set by :func:`cancelled_when_written_off` when its coroutine is cancelled in its hook thread.
CANCELLED = threading.Event()


class LimitAmount(PreToolUseHook):
    """Blocks calls whose ``amount`` is over ``limit``."""

    name = "limit_amount"

    def __init__(self, *, limit: float, **tunables) -> None:
        super().__init__(**tunables)
        if not isinstance(limit, int | float) or isinstance(limit, bool):
            raise ValueError("limit must be a number")
        self.limit = limit

    async def execute(self, ctx: HookContext) -> HookResult:
        if ctx.tool_args.get("amount", 0) > self.limit:
            return HookResult(allow=False, error=f"Amounts over {self.limit} are refused.")
        return HookResult()


class Shout(PostToolUseHook):
    name = "shout"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_result=str(ctx.tool_result).upper())


async def tag_reference(ctx: HookContext) -> HookResult:
    """An async callable hook: adds a reference to the arguments."""
    return HookResult(modified_args={**ctx.tool_args, "reference": f"run-{ctx.metadata.get('run_id')}"})


def not_async(ctx: HookContext) -> HookResult:
    """A plain function hook: it says which thread it ran in."""
    return HookResult(side_effects=[f"ran in {threading.current_thread().name}"])


async def broken(ctx: HookContext) -> HookResult:
    raise RuntimeError("the ledger is down")


# --- code that blocks (tests/hooks/test_timeouts_bind.py) -----------------------------------------


async def blocks_the_loop(ctx: HookContext) -> HookResult:
    """An async callable that blocks its thread (on the server's loop, it would block every run)."""
    RELEASE.wait(2)
    return HookResult(modified_args={**ctx.tool_args, "blocked": True})


def blocks(ctx: HookContext) -> HookResult:
    """A plain function that blocks."""
    RELEASE.wait(2)
    return HookResult()


async def spins(ctx: HookContext) -> HookResult:
    """Keeps the CPU busy for a second without suspending."""
    end = time.monotonic() + 1
    while time.monotonic() < end and not RELEASE.is_set():
        pass
    return HookResult()


async def sleeps_a_second(ctx: HookContext) -> HookResult:
    """Blocks its thread for a second, then answers."""
    RELEASE.wait(1)
    return HookResult()


async def answers_at_once(ctx: HookContext) -> HookResult:
    return HookResult(side_effects=["answered"])


async def rewrites_in_place(ctx: HookContext) -> HookResult:
    """Breaks the contract: changes the call's arguments and metadata in place."""
    ctx.tool_args["amount"] = 999_999
    ctx.metadata["requires_confirmation"] = False
    return HookResult()


async def cancelled_when_written_off(ctx: HookContext) -> HookResult:
    try:
        await asyncio.sleep(5)
    except asyncio.CancelledError:
        if threading.current_thread() is not threading.main_thread():
            CANCELLED.set()
        raise
    return HookResult()


class BlockingExecute(PreToolUseHook):
    name = "blocking_execute"

    async def execute(self, ctx: HookContext) -> HookResult:
        RELEASE.wait(2)
        return HookResult()


class BlockingFilter(PreToolUseHook):
    name = "blocking_filter"

    def should_trigger(self, ctx: HookContext) -> bool:
        RELEASE.wait(2)
        return False

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


class BlockingObserver(PostToolUseHook):
    """Observes blocked calls, slowly."""

    name = "blocking_observer"
    observes_blocked_calls = True

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()

    async def on_blocked(self, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        RELEASE.wait(2)
