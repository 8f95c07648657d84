"""The hook registry fails closed (docs/design.md §3): a hook that raises, times out, answers wrongly or
suspends where it may not blocks the call or withholds the result, unless it may fail open."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hooks import (
    HookContext,
    HookRegistry,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
    SuspendRun,
)
from tests.hooks.registry_kit import Raises, Recorder, Sleeps, ctx


class ReturnsDict(PreToolUseHook):
    name = "sloppy"

    async def execute(self, ctx: HookContext) -> Any:
        return {"allow": True}


class TriggerRaises(PreToolUseHook):
    name = "bad_filter"

    def should_trigger(self, ctx: HookContext) -> bool:
        raise KeyError("requires_confirmation")

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


# --- failing closed ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hook", "reason"),
    [
        (Raises(), "raised RuntimeError: database unavailable"),
        (Sleeps(), "timed out after 0.05 s"),
        (ReturnsDict(), "returned dict instead of HookResult"),
        (TriggerRaises(), "raised KeyError"),
    ],
    ids=["raise", "timeout", "bad-return", "raising-should_trigger"],
)
async def test_a_failing_pre_hook_blocks_the_call_and_is_reported(hook: PreToolUseHook, reason: str) -> None:
    log: list = []
    registry = HookRegistry([hook, Recorder("later", log, priority=1000)])
    out = await registry.run_pre_tool_use(ctx(amount=1))

    assert not out.allow
    assert out.blocked_by == hook.hook_name
    assert hook.hook_name in out.error
    assert "could not complete" in out.error
    assert "database unavailable" not in out.error, "internal details stay in the trace, not the LLM"
    [effect] = out.side_effects
    assert effect.failure and effect.hook == hook.hook_name and reason in effect.message
    assert log == [], "nothing after a failed hook runs"


@pytest.mark.parametrize("hook_cls", [Raises, Sleeps, ReturnsDict], ids=["raise", "timeout", "bad-return"])
async def test_a_failing_post_hook_replaces_the_observation_with_an_error_notice(hook_cls: type) -> None:
    class PostVersion(PostToolUseHook):
        name = hook_cls.name
        timeout = hook_cls.timeout
        execute = hook_cls.execute

    context = ctx()
    context.tool_result = "card 6222-0000-1111-2222"
    out = await HookRegistry([PostVersion()]).run_post_tool_use(context)

    assert "6222" not in str(out.result)
    assert "withheld" in out.result and hook_cls.name in out.result
    assert out.failed_hooks == [hook_cls.name]
    assert out.side_effects[0].failure


async def test_a_failing_session_start_hook_fails_the_run_start() -> None:
    class Boom(SessionStartHook):
        name = "load_profile"

        async def execute(self, ctx: HookContext) -> HookResult:
            raise ConnectionError("profile service down")

    out = await HookRegistry([Boom()]).run_session_start(HookContext())
    assert not out.ok
    assert out.failed_by == "load_profile"
    assert "load_profile" in out.error


async def test_on_error_allow_lets_the_call_through_but_still_reports_the_failure() -> None:
    log: list = []
    registry = HookRegistry([Raises(on_error="allow"), Recorder("after", log, priority=1000)])
    out = await registry.run_pre_tool_use(ctx(amount=3))

    assert out.allow and out.tool_args == {"amount": 3}
    assert log == [("after", {"amount": 3})]
    assert out.side_effects[0].failure and "broken" in out.side_effects[0].message


async def test_on_error_allow_on_a_post_hook_keeps_the_result() -> None:
    class Flaky(PostToolUseHook):
        name = "flaky_audit"
        on_error = "allow"

        async def execute(self, ctx: HookContext) -> HookResult:
            raise OSError("disk full")

    context = ctx()
    context.tool_result = "ok"
    out = await HookRegistry([Flaky()]).run_post_tool_use(context)
    assert out.result == "ok" and out.failed_hooks == []


async def test_a_per_declaration_timeout_overrides_the_class_default() -> None:
    out = await HookRegistry([Sleeps(timeout=0.01)]).run_pre_tool_use(ctx())
    assert "timed out after 0.01 s" in out.side_effects[0].message


async def test_a_hook_that_suspends_but_finishes_in_time_is_not_cut_off() -> None:
    class Quick(PreToolUseHook):
        timeout = 1.0

        async def execute(self, ctx: HookContext) -> HookResult:
            await asyncio.sleep(0.01)
            return HookResult(modified_args={"checked": True})

    out = await HookRegistry([Quick()]).run_pre_tool_use(ctx())
    assert out.allow and out.tool_args == {"checked": True}


async def test_suspend_is_a_distinct_outcome_not_a_block() -> None:
    class Gate(PreToolUseHook):
        name = "gate"

        async def execute(self, ctx: HookContext) -> HookResult:
            raise SuspendRun("waiting for approval", detail={"request": "r-1"})

    out = await HookRegistry([Gate()]).run_pre_tool_use(ctx())
    assert out.suspended and not out.allow and out.error is None
    assert out.suspension.detail == {"request": "r-1"}


async def test_suspending_outside_pre_tool_use_fails_closed() -> None:
    class Odd(PostToolUseHook):
        name = "odd"

        async def execute(self, ctx: HookContext) -> HookResult:
            raise SuspendRun("no")

    context = ctx()
    context.tool_result = "raw"
    out = await HookRegistry([Odd()]).run_post_tool_use(context)
    assert out.failed_hooks == ["odd"] and out.result != "raw"


async def test_cancelling_the_caller_is_not_swallowed_as_a_hook_failure() -> None:
    registry = HookRegistry([Sleeps(timeout=10)])
    task = asyncio.create_task(registry.run_pre_tool_use(ctx()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
