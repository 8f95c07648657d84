"""Hooks that python declarations name in the tests (``tests.hooks.declared_examples.…``)."""

from __future__ import annotations

from hooks import HookContext, HookResult, PostToolUseHook, PreToolUseHook


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
    return HookResult()


async def broken(ctx: HookContext) -> HookResult:
    raise RuntimeError("the ledger is down")
