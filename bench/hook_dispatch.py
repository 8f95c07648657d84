"""Per-tool-call cost of the hook registry: a PreToolUse + PostToolUse chain of 10 hooks.

(a) none of the 10 hooks triggers; (b) all 10 trigger and do nothing. Each is printed beside a bare
awaited call measured in the same run, and the registry's own cost is the difference.
Targets on the reference machine (2 cores): (a) <= 5 µs, (b) <= 25 µs per tool call.

    python bench/hook_dispatch.py [--calls N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hooks import HookContext, HookRegistry, HookResult, PostToolUseHook, PreToolUseHook

_OK = HookResult()


class QuietPre(PreToolUseHook):
    name = "quiet_pre"

    def should_trigger(self, ctx: HookContext) -> bool:
        return False

    async def execute(self, ctx: HookContext) -> HookResult:
        return _OK


class QuietPost(PostToolUseHook):
    name = "quiet_post"

    def should_trigger(self, ctx: HookContext) -> bool:
        return False

    async def execute(self, ctx: HookContext) -> HookResult:
        return _OK


class NoOpPre(PreToolUseHook):
    name = "noop_pre"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


class NoOpPost(PostToolUseHook):
    name = "noop_post"

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


async def tool(args: dict) -> str:
    return "ok"


async def bare(ctx: HookContext, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await tool(ctx.tool_args)
    return (time.perf_counter() - start) / calls


async def chained(registry: HookRegistry, ctx: HookContext, calls: int) -> float:
    pre, post = registry.run_pre_tool_use, registry.run_post_tool_use
    start = time.perf_counter()
    for _ in range(calls):
        out = await pre(ctx)
        ctx.tool_result = await tool(out.tool_args)
        await post(ctx)
    return (time.perf_counter() - start) / calls


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    opts = parser.parse_args()

    cases = {
        "(a) 10 hooks, none triggering": HookRegistry(
            [QuietPre(priority=i) for i in range(5)] + [QuietPost(priority=i) for i in range(5)]
        ),
        "(b) 10 hooks, all no-ops": HookRegistry(
            [NoOpPre(priority=i) for i in range(5)] + [NoOpPost(priority=i) for i in range(5)]
        ),
    }
    targets = {"(a) 10 hooks, none triggering": 5.0, "(b) 10 hooks, all no-ops": 25.0}
    ctx = HookContext(tool_name="demo__noop", tool_args={"amount": 10}, metadata={"run_id": 1})
    print(f"{opts.calls} tool calls x {opts.repeat} repeats; median per tool call (Pre + tool + Post)")
    failed = False
    for label, registry in cases.items():
        await chained(registry, ctx, 1000)  # warm up
        base = statistics.median([await bare(ctx, opts.calls) for _ in range(opts.repeat)])
        full = statistics.median([await chained(registry, ctx, opts.calls) for _ in range(opts.repeat)])
        net = (full - base) * 1e6
        ok = net <= targets[label]
        failed |= not ok
        print(
            f"{label:32} bare awaited call {base * 1e6:6.2f} µs | with hooks {full * 1e6:6.2f} µs | "
            f"registry cost {net:6.2f} µs (target <= {targets[label]:g} µs) {'OK' if ok else 'OVER'}"
        )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    asyncio.run(main())
