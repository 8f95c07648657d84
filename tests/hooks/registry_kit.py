"""Shared by the hook registry's tests (test_registry_*.py, test_shadow.py): the context of a payment
call, a hook that records what it saw (and may rewrite it), one that blocks, one that raises and one
that outlives its timeout."""

from __future__ import annotations

import asyncio
from typing import Any

from hooks import HookContext, HookResult, PreToolUseHook


def ctx(**args: Any) -> HookContext:
    return HookContext(tool_name="oa__purchase_pay", tool_args=dict(args), metadata={"run_id": 7})


class Recorder(PreToolUseHook):
    """Records the order it ran in and the args it saw."""

    def __init__(self, tag: str, log: list, *, rewrite: dict | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.tag, self.log, self.rewrite = tag, log, rewrite

    async def execute(self, ctx: HookContext) -> HookResult:
        self.log.append((self.tag, dict(ctx.tool_args)))
        if self.rewrite is None:
            return HookResult(side_effects=[f"{self.tag} saw {sorted(ctx.tool_args)}"])
        return HookResult(modified_args={**ctx.tool_args, **self.rewrite})


class Blocker(PreToolUseHook):
    name = "amount_limit"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error="Payments over 1000 need a second signature.")


class Raises(PreToolUseHook):
    name = "broken"

    async def execute(self, ctx: HookContext) -> HookResult:
        raise RuntimeError("database unavailable")


class Sleeps(PreToolUseHook):
    name = "slow"
    timeout = 0.05

    async def execute(self, ctx: HookContext) -> HookResult:
        await asyncio.sleep(5)
        return HookResult()
