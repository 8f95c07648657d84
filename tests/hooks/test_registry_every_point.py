"""Every point's chain, and the observers of a blocked call, run through one loop (``hooks.registry``):
what it owns holds the same at each of them — timeouts (``should_trigger`` included) attributed to
the hook, ``on_error``, telemetry notes, and a context copied only when something in it changes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from fimone import telemetry
from hooks import (
    Hook,
    HookContext,
    HookRegistry,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
    SuspendRun,
)
from tests.hooks.registry_kit import Blocker, ctx

POINTS = {"pre": PreToolUseHook, "post": PostToolUseHook, "start": SessionStartHook}


async def run(point: str, hooks: list[Hook], context: HookContext | None = None) -> Any:
    registry = HookRegistry(hooks)
    context = context or ctx(amount=1)
    if point == "pre":
        return await registry.run_pre_tool_use(context)
    if point == "post":
        context.tool_result = "raw result"
        return await registry.run_post_tool_use(context)
    return await registry.run_session_start(context)


def failed_by(point: str, out: Any) -> list[str]:
    """The hooks a point's outcome names as having stopped or spoilt it."""
    if point == "pre":
        return [out.blocked_by] if out.blocked_by else []
    if point == "post":
        return out.failed_hooks
    return [out.failed_by] if out.failed_by else []


def failures(out: Any) -> list[tuple[str, str]]:
    return [(e.hook, e.message) for e in out.side_effects if e.failure]


def hook(point: str, name: str, *, execute: Any, should_trigger: Any = None, **attrs: Any) -> Hook:
    body: dict[str, Any] = {"name": name, "execute": execute, **attrs}
    if should_trigger is not None:
        body["should_trigger"] = should_trigger
    return type(name, (POINTS[point],), body)()


async def sleeps(self: Hook, ctx: HookContext) -> HookResult:
    await asyncio.sleep(5)
    return HookResult()


async def answers(self: Hook, ctx: HookContext) -> HookResult:
    return HookResult()


def never(self: Hook, ctx: HookContext) -> bool:
    return False


def blocks_the_loop(self: Hook, ctx: HookContext) -> bool:
    time.sleep(0.15)
    return True


@pytest.mark.parametrize("point", POINTS)
async def test_a_hook_that_times_out_is_named_at_every_point(point: str) -> None:
    slow = hook(point, "slow_check", execute=sleeps, timeout=0.05)

    out = await run(point, [slow])

    assert failed_by(point, out) == ["slow_check"]
    assert failures(out) == [("slow_check", "hook slow_check timed out after 0.05 s")]


@pytest.mark.parametrize("point", POINTS)
async def test_the_time_should_trigger_takes_counts_at_every_point(point: str) -> None:
    slow = hook(point, "slow_filter", execute=answers, should_trigger=blocks_the_loop, timeout=0.05)

    out = await run(point, [slow])

    assert failed_by(point, out) == ["slow_filter"]
    [(name, message)] = failures(out)
    assert name == "slow_filter" and message.startswith("hook slow_filter timed out after 0.05 s (it ran for")


@pytest.mark.parametrize("point", POINTS)
async def test_on_error_allow_goes_on_at_every_point_and_names_the_hook(point: str) -> None:
    async def raises(self: Hook, ctx: HookContext) -> HookResult:
        raise RuntimeError("down")

    out = await run(point, [hook(point, "flaky", execute=raises, on_error="allow")])

    assert failed_by(point, out) == []
    assert failures(out) == [("flaky", "hook flaky raised RuntimeError: down")]


@pytest.mark.parametrize("point", POINTS)
async def test_a_quiet_chain_hands_every_hook_the_callers_context(point: str) -> None:
    context = ctx(amount=1)
    seen: list[HookContext] = []

    async def records(self: Hook, ctx: HookContext) -> HookResult:
        seen.append(ctx)
        return HookResult(side_effects=["looked"])

    await run(point, [hook(point, f"h{i}", execute=records) for i in range(3)], context)

    assert len(seen) == 3 and all(c is context for c in seen), "nothing changed: nothing copied"


async def test_a_rewrite_is_seen_by_later_hooks_on_a_copy() -> None:
    context = ctx(amount=1)
    seen: list[HookContext] = []

    async def rewrites(self: Hook, ctx: HookContext) -> HookResult:
        seen.append(ctx)
        return HookResult(modified_args={"amount": len(seen) + 1})

    out = await run("pre", [hook("pre", f"h{i}", execute=rewrites, priority=i) for i in range(2)], context)

    assert seen[0] is context and seen[1] is not context and seen[1].tool_args == {"amount": 2}
    assert out.tool_args == {"amount": 3} and context.tool_args == {"amount": 1}


# --- telemetry: every point's notes from the one loop; observers are not traced -------------------


@pytest.fixture
def notes(monkeypatch) -> list[tuple[str, str, str, bool]]:
    recorded: list[tuple[str, str, str, bool]] = []

    def hook_decided(
        *, hook: str, point: str, started: float, ended: float, decision: str, triggered: bool = True
    ):
        assert ended >= started
        recorded.append((hook, point, decision, triggered))

    monkeypatch.setattr(telemetry, "ENABLED", True)
    monkeypatch.setattr(telemetry, "hook_decided", hook_decided)
    return recorded


async def test_each_point_notes_each_hook_with_its_decision(notes) -> None:
    async def rewrites(self: Hook, ctx: HookContext) -> HookResult:
        return HookResult(modified_result="clean")

    async def adds(self: Hook, ctx: HookContext) -> HookResult:
        return HookResult(additional_context="Be brief.")

    async def suspends(self: Hook, ctx: HookContext) -> HookResult:
        raise SuspendRun("waiting")

    await run(
        "pre",
        [
            hook("pre", "skips", execute=answers, should_trigger=never, priority=1),
            hook("pre", "gate", execute=suspends, priority=2),
        ],
    )
    await run(
        "post", [hook("post", "redact", execute=rewrites), hook("post", "slow", execute=sleeps, timeout=0.05)]
    )
    await run("start", [hook("start", "profile", execute=adds)])

    assert notes == [
        ("skips", "PreToolUse", "skipped", False),
        ("gate", "PreToolUse", "suspend", True),
        ("redact", "PostToolUse", "rewrite", True),
        ("slow", "PostToolUse", "failed", True),
        ("profile", "SessionStart", "allow", True),
    ]


async def test_the_observers_of_a_blocked_call_are_not_traced(notes) -> None:
    async def observed(self: Hook, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        return None

    observer = hook("post", "audit", execute=answers, on_blocked=observed, observes_blocked_calls=True)

    out = await HookRegistry([Blocker(), observer]).run_pre_tool_use(ctx())

    assert not out.allow and notes == [("amount_limit", "PreToolUse", "block", True)]


# --- observers of a blocked call ------------------------------------------------------------------


def observer(name: str, on_blocked: Any, **attrs: Any) -> Hook:
    return hook("post", name, execute=answers, on_blocked=on_blocked, observes_blocked_calls=True, **attrs)


async def test_every_observer_is_told_and_each_failure_is_named_the_call_staying_blocked() -> None:
    told: list[str] = []

    async def tells(self: Hook, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        told.append(f"{self.hook_name}: {blocked_by}")

    async def sleeps_past(self: Hook, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        await asyncio.sleep(5)

    async def own_timeout(self: Hook, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        raise TimeoutError("the audit store timed out")

    async def suspends(self: Hook, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        raise SuspendRun("no")

    observers = [
        observer("sleepy", sleeps_past, timeout=0.05, priority=1),
        observer("own", own_timeout, timeout=0.5, priority=2),
        observer("odd", suspends, priority=3),
        observer("audit", tells, priority=4),
    ]

    out = await HookRegistry([Blocker(), *observers]).run_pre_tool_use(ctx())

    assert not out.allow and out.blocked_by == "amount_limit"
    assert failures(out) == [
        ("sleepy", "hook sleepy timed out after 0.05 s"),
        ("own", "hook own timed out after 0.5 s"),
        ("odd", "hook odd tried to suspend the run outside PreToolUse"),
    ]
    assert told == ["audit: amount_limit"]


async def test_an_observer_whose_filter_used_up_its_timeout_is_not_started() -> None:
    told: list[str] = []

    async def tells(self: Hook, ctx: HookContext, *, blocked_by: str, error: str) -> None:
        told.append(blocked_by)

    late = observer("late", tells, should_trigger=blocks_the_loop, timeout=0.05)

    out = await HookRegistry([Blocker(), late]).run_pre_tool_use(ctx())

    assert told == [], "never started past its timeout"
    assert failures(out) == [("late", "hook late timed out after 0.05 s")]
