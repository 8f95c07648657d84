"""The hook registry's ordering and chaining (docs/design.md §1.1): priorities, arguments and results
rewritten from hook to hook, blocks and filters, and what each hook point collects."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hooks import (
    HookContext,
    HookRegistry,
    HookResult,
    PostToolUseHook,
    PostToolUseOutcome,
    PreToolUseHook,
    PreToolUseOutcome,
    SessionStartHook,
)
from hooks.contract import HookPoint
from tests.hooks.registry_kit import Blocker, Recorder, ctx

# --- ordering and chaining ---------------------------------------------------------------------


async def test_it_runs_hooks_in_ascending_priority_whatever_the_declaration_order() -> None:
    log: list = []
    registry = HookRegistry(
        [Recorder("c", log, priority=30), Recorder("a", log, priority=10), Recorder("b", log, priority=20)]
    )
    await registry.run_pre_tool_use(ctx(amount=1))
    assert [tag for tag, _ in log] == ["a", "b", "c"]


async def test_equal_priorities_keep_declaration_order() -> None:
    log: list = []
    registry = HookRegistry([Recorder("first", log), Recorder("second", log), Recorder("third", log)])
    await registry.run_pre_tool_use(ctx())
    assert [tag for tag, _ in log] == ["first", "second", "third"]


async def test_rewritten_args_flow_through_three_hooks_into_the_outcome() -> None:
    log: list = []
    registry = HookRegistry(
        [
            Recorder("currency", log, rewrite={"currency": "CNY"}, priority=1),
            Recorder("cap", log, rewrite={"amount": 1000}, priority=2),
            Recorder("observer", log, priority=3),
        ]
    )
    original = ctx(amount=5000)
    out = await registry.run_pre_tool_use(original)

    assert log == [
        ("currency", {"amount": 5000}),
        ("cap", {"amount": 5000, "currency": "CNY"}),
        ("observer", {"amount": 1000, "currency": "CNY"}),
    ]
    assert out.allow and out.tool_args == {"amount": 1000, "currency": "CNY"}
    assert original.tool_args == {"amount": 5000}, "the caller's context keeps the original args"


async def test_a_block_stops_the_chain_and_its_error_is_what_the_llm_sees() -> None:
    log: list = []
    registry = HookRegistry(
        [Recorder("before", log, priority=1), Blocker(priority=2), Recorder("after", log, priority=3)]
    )
    out = await registry.run_pre_tool_use(ctx(amount=5000))

    assert not out.allow
    assert out.error == "Payments over 1000 need a second signature."
    assert out.blocked_by == "amount_limit"
    assert [tag for tag, _ in log] == ["before"], "hooks after the block must not run"


async def test_should_trigger_filters_hooks_out() -> None:
    class OnlyPayments(Blocker):
        def should_trigger(self, ctx: HookContext) -> bool:
            return ctx.tool_name.endswith("_pay")

    registry = HookRegistry([OnlyPayments()])
    listed = await registry.run_pre_tool_use(HookContext(tool_name="oa__purchase_list"))
    paid = await registry.run_pre_tool_use(HookContext(tool_name="oa__purchase_pay"))
    assert listed.allow and not paid.allow


async def test_an_async_should_trigger_is_awaited() -> None:
    class AsyncFilter(Blocker):
        async def should_trigger(self, ctx: HookContext) -> bool:
            await asyncio.sleep(0)
            return ctx.tool_args.get("amount", 0) > 100

    registry = HookRegistry([AsyncFilter()])
    assert (await registry.run_pre_tool_use(ctx(amount=5))).allow
    assert not (await registry.run_pre_tool_use(ctx(amount=500))).allow


class _Later:
    """An awaitable that is not a coroutine (only ``__await__``), answering after a loop turn."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def __await__(self) -> Any:
        yield from asyncio.sleep(0).__await__()
        return self.answer


@pytest.mark.parametrize(
    ("answer", "runs"),
    [
        (1, True),
        ("yes", True),
        (0, False),
        (None, False),
        ("", False),
        (_Later(True), True),
        (_Later(0), False),
    ],
    ids=["1", "text", "0", "None", "empty", "awaitable-true", "awaitable-falsy"],
)
async def test_should_trigger_answers_other_than_bools_count_by_their_truth(answer: Any, runs: bool) -> None:
    class Answers(Blocker):
        def should_trigger(self, ctx: HookContext) -> Any:
            return answer

    out = await HookRegistry([Answers()]).run_pre_tool_use(ctx())
    assert out.allow is not runs


async def test_a_filter_set_on_the_instance_is_honoured() -> None:
    blocker = Blocker()
    blocker.should_trigger = lambda ctx: False  # type: ignore[method-assign]
    assert (await HookRegistry([blocker]).run_pre_tool_use(ctx())).allow


async def test_the_outcomes_of_a_quiet_chain_are_complete() -> None:
    class Quiet(PreToolUseHook):
        def should_trigger(self, ctx: HookContext) -> bool:
            return False

        async def execute(self, ctx: HookContext) -> HookResult:
            return HookResult()

    class QuietAfter(PostToolUseHook):
        async def execute(self, ctx: HookContext) -> HookResult:
            return HookResult()

    registry = HookRegistry([Quiet(), QuietAfter()])
    context = ctx(amount=1)
    pre = await registry.run_pre_tool_use(context)
    context.tool_result = "ok"
    post = await registry.run_post_tool_use(context)

    assert pre == PreToolUseOutcome(allow=True, tool_args={"amount": 1})
    assert post == PostToolUseOutcome(result="ok")
    assert pre.side_effects is not post.side_effects


async def test_post_tool_use_results_chain_and_side_effects_are_attributed() -> None:
    class Redact(PostToolUseHook):
        name = "redact"
        priority = 1

        async def execute(self, ctx: HookContext) -> HookResult:
            return HookResult(
                modified_result=ctx.tool_result.replace("6222-0000-1111", "****"),
                side_effects=["redacted a card number"],
            )

    class Truncate(PostToolUseHook):
        name = "truncate"
        priority = 2

        async def execute(self, ctx: HookContext) -> HookResult:
            return HookResult(modified_result=ctx.tool_result[:20])

    registry = HookRegistry([Truncate(), Redact()])
    context = ctx()
    context.tool_result = "paid to card 6222-0000-1111 at 10:00, ref 42"
    out = await registry.run_post_tool_use(context)

    assert out.result == "paid to card **** at"
    assert [(e.hook, e.message) for e in out.side_effects] == [("redact", "redacted a card number")]


async def test_session_start_context_is_collected_in_priority_order() -> None:
    def context_hook(text: str, priority: int) -> SessionStartHook:
        class Piece(SessionStartHook):
            name = f"piece_{text}"

            async def execute(self, ctx: HookContext) -> HookResult:
                return HookResult(additional_context=text, allow=False)  # allow is ignored here

        return Piece(priority=priority)

    registry = HookRegistry([context_hook("third", 3), context_hook("first", 1), context_hook("second", 2)])
    out = await registry.run_session_start(HookContext(agent_id=1, user_id=2))
    assert out.ok
    assert out.additional_context == ["first", "second", "third"]


async def test_allow_false_is_ignored_outside_pre_tool_use() -> None:
    class Denies(PostToolUseHook):
        async def execute(self, ctx: HookContext) -> HookResult:
            return HookResult(allow=False, error="nope")

    context = ctx()
    context.tool_result = {"ok": True}
    out = await HookRegistry([Denies()]).run_post_tool_use(context)
    assert out.result == {"ok": True} and out.failed_hooks == []


async def test_hooks_see_the_point_they_run_at() -> None:
    seen: list = []

    class Any_(PreToolUseHook):
        async def execute(self, ctx: HookContext) -> HookResult:
            seen.append(ctx.hook_point)
            return HookResult()

    await HookRegistry([Any_()]).run_pre_tool_use(HookContext())
    assert seen == [HookPoint.PRE_TOOL_USE]
