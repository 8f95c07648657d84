"""Per-tool-call cost of the hook registry: a PreToolUse + PostToolUse chain of 10 hooks (5 + 5).

Each case is measured beside a hand-written loop that awaits the same ten hooks one by one, each
under ``asyncio.timeout(hook.timeout)`` with a ``try/except`` around it: the least that per-hook
timeouts and failing closed need, with none of the registry's chaining, attribution or clock. A
second baseline, the same loop *without* ``asyncio.timeout`` (only the ``try/except``), shows what
the chaining, attribution and clock cost over calling the hooks at all; it binds no timeout, so it
is a floor to read the registry against, not a contender (the targets stay against the first).

(a) none of the hooks triggers; (b) all trigger and do nothing; (c) all trigger, called as the
engine calls the registry (``agents.engine.pipeline``): a fresh context per call with the run's
facts in ``metadata``, the run's events handed to ``run_pre_tool_use``, two of the PreToolUse
hooks system hooks (as the read-only guard and the approval gate are, each then given its own
context carrying the events), every hook filtering on the tool's name, and a fresh PostToolUse
context carrying the result.

Method: the machine is shared, so the registry, the hand-written loop and (for (a)) a bare awaited
call are measured in the same process, interleaved in ABBA order over ``--rounds`` rounds. Each
measurement is ``--calls`` tool calls made ``--batch`` at a time, and the event loop gets a turn
after each batch (outside the timed part), as it does in a run, where tool calls are separated by
database writes: the cancelled timers of the hand-written loop's ``asyncio.timeout`` are cleaned
up instead of piling up in the loop's heap. ``--batch 1`` measures every call with caches as cold
as a loop turn leaves them. Figures are medians over the rounds, with their spread [min-max].

Targets: (a) the registry costs <= 3 µs per dispatch (half a tool call's cost over the bare call:
a tool call dispatches twice); (b) and (c) the registry costs <= 1.3x the hand-written loop (with
timeouts). The ratio to the loop without timeouts is printed beside, with no target.

``--against REV`` compares this tree's registry with the one of git revision ``REV`` (checked
out in a temporary worktree; or, when ``REV`` is a directory, the ``hooks`` package in it, e.g. a
copy of the package taken before a change) in one run: ``--pairs`` times, the benchmark runs once with each
tree's ``hooks`` package, alternately, each in a fresh process; per case, the figure compared is
the registry's cost as a ratio to the hand-written loop measured beside it (which does not depend
on the registry's code, so the machine's drift cancels out), and the result is this tree's ratio
over REV's, median [min-max] over the pairs. Target: <= 1.05 in every case (no regression).

    python bench/hook_dispatch.py [--calls N] [--batch B] [--rounds R]
    python bench/hook_dispatch.py --against REV|DIR [--pairs P] [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
# ``--hooks-from DIR`` (set by ``--against``): the hooks package of that tree instead of this one's.
TREE = Path(sys.argv[sys.argv.index("--hooks-from") + 1]) if "--hooks-from" in sys.argv else HERE
sys.path.insert(0, str(TREE))

from hooks import Hook, HookContext, HookRegistry, HookResult, PostToolUseHook, PreToolUseHook  # noqa: E402

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


class ForToolPre(PreToolUseHook):
    """A declared hook: filters on the tool's name, then does nothing."""

    name = "for_tool_pre"

    def should_trigger(self, ctx: HookContext) -> bool:
        return ctx.tool_name.startswith("demo__")

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


class ForToolPost(PostToolUseHook):
    name = "for_tool_post"

    def should_trigger(self, ctx: HookContext) -> bool:
        return ctx.tool_name.startswith("demo__")

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


class SystemPre(ForToolPre):
    """A system hook (the registry gives it the run's events), like the guard and the gate."""

    name = "system_pre"
    system = True


class Events:
    """The run's event publisher (``RunEvents``), as the engine's journal is."""

    async def publish(self, type_: str, payload: dict[str, Any], *, at_once: bool = True) -> None:
        return None


async def tool(args: dict[str, Any]) -> str:
    return "ok"


FACTS = {"org_id": 1, "conversation_id": 2, "run_id": 3, "execution_path": "react"}
EVENTS = Events()

# One tool call, as each contender makes it.
Call = Callable[[], Awaitable[None]]


def registry_call(registry: HookRegistry, ctx: HookContext) -> Call:
    pre, post = registry.run_pre_tool_use, registry.run_post_tool_use

    async def call() -> None:
        out = await pre(ctx)
        ctx.tool_result = await tool(out.tool_args)
        await post(ctx)

    return call


async def _awaited(hooks: list[Hook], ctx: HookContext) -> bool:
    """The hand-written loop: each hook under its own timeout; the first failure blocks."""
    for hook in hooks:
        try:
            async with asyncio.timeout(hook.timeout):
                if hook.should_trigger(ctx):
                    await hook.execute(ctx)
        except Exception:
            return False
    return True


async def _untimed(hooks: list[Hook], ctx: HookContext) -> bool:
    """The hand-written loop without timeouts (the second baseline): the first failure blocks."""
    for hook in hooks:
        try:
            if hook.should_trigger(ctx):
                await hook.execute(ctx)
        except Exception:
            return False
    return True


# A hand-written loop over one point's hooks: _awaited or _untimed.
Loop = Callable[[list[Hook], HookContext], Awaitable[bool]]


def hand_written_call(hooks: list[Hook], ctx: HookContext, loop: Loop = _awaited) -> Call:
    pre = [h for h in hooks if isinstance(h, PreToolUseHook)]
    post = [h for h in hooks if isinstance(h, PostToolUseHook)]

    async def call() -> None:
        await loop(pre, ctx)
        ctx.tool_result = await tool(ctx.tool_args)
        await loop(post, ctx)

    return call


def bare_call(ctx: HookContext) -> Call:
    async def call() -> None:
        ctx.tool_result = await tool(ctx.tool_args)

    return call


def _engine_contexts(call_id: str) -> tuple[HookContext, dict[str, Any]]:
    args = {"amount": 10}
    ctx = HookContext(
        agent_id=1,
        user_id=2,
        tool_name="demo__pay",
        tool_args=args,
        metadata={**FACTS, "tool_call_id": call_id, "requires_confirmation": False, "is_write": True},
    )
    return ctx, args


def _post_context(ctx: HookContext, result: Any, request_id: str | None) -> HookContext:
    return HookContext(
        tool_name=ctx.tool_name,
        tool_args=ctx.tool_args,
        agent_id=ctx.agent_id,
        user_id=ctx.user_id,
        metadata={**ctx.metadata, "tool_status": "succeeded", "duration_ms": 0.125},
        tool_result=result,
        confirmation_request_id=request_id,
    )


def engine_registry_call(registry: HookRegistry) -> Call:
    pre, post = registry.run_pre_tool_use, registry.run_post_tool_use

    async def call() -> None:
        ctx, _ = _engine_contexts("call-1")
        out = await pre(ctx, events=EVENTS)
        result = await tool(out.tool_args)
        await post(_post_context(ctx, result, out.confirmation_request_id))

    return call


def engine_hand_written_call(hooks: list[Hook], loop: Loop = _awaited) -> Call:
    pre = [h for h in hooks if isinstance(h, PreToolUseHook)]
    post = [h for h in hooks if isinstance(h, PostToolUseHook)]

    async def call() -> None:
        ctx, args = _engine_contexts("call-1")
        await loop(pre, ctx)
        result = await tool(args)
        await loop(post, _post_context(ctx, result, None))

    return call


async def measure(call: Call, calls: int, batch: int) -> float:
    """Seconds per tool call, over ``calls`` calls made ``batch`` at a time; the event loop gets a
    turn after each batch, outside the timed part."""
    clock = time.perf_counter
    batches = max(1, calls // batch)
    total = 0.0
    for _ in range(batches):
        start = clock()
        for _ in range(batch):
            await call()
        total += clock() - start
        await asyncio.sleep(0)
    return total / (batches * batch)


async def abba(contenders: dict[str, Call], calls: int, batch: int, rounds: int) -> dict[str, list[float]]:
    """Per contender, its figure in each round: the mean of its two measurements in that round,
    taken in ABBA order (reversed every other round)."""
    names = list(contenders)
    figures: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm up
        await measure(contenders[name], 500, batch)
    for round_ in range(rounds):
        order = names + names[::-1]
        if round_ % 2:
            order.reverse()
        taken: dict[str, list[float]] = {name: [] for name in names}
        for name in order:
            taken[name].append(await measure(contenders[name], calls, batch))
        for name in names:
            figures[name].append(statistics.fmean(taken[name]))
    return figures


def spread(values: list[float], scale: float = 1e6, digits: int = 2) -> str:
    return (
        f"{statistics.median(values) * scale:.{digits}f} "
        f"[{min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f}]"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4_000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument(
        "--against",
        metavar="REV",
        help="compare with the registry of git revision REV, or of the hooks package in directory REV",
    )
    parser.add_argument("--pairs", type=int, default=5, help="with --against: runs of each tree")
    parser.add_argument("--hooks-from", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.against:
        sys.exit(against(opts))

    quiet: list[Hook] = [QuietPre(priority=i) for i in range(5)] + [QuietPost(priority=i) for i in range(5)]
    noop: list[Hook] = [NoOpPre(priority=i) for i in range(5)] + [NoOpPost(priority=i) for i in range(5)]
    engine: list[Hook] = [
        SystemPre(priority=0),
        *(ForToolPre(priority=i) for i in range(1, 4)),
        SystemPre(priority=1_000_000),
        *(ForToolPost(priority=i) for i in range(5)),
    ]
    ctx = HookContext(tool_name="demo__noop", tool_args={"amount": 10}, metadata={"run_id": 1})
    cases: dict[str, dict[str, Call]] = {
        "(a) 10 hooks, none triggering": {
            "registry": registry_call(HookRegistry(quiet), ctx),
            "hand-written": hand_written_call(quiet, ctx),
            "no timeouts": hand_written_call(quiet, ctx, _untimed),
            "bare": bare_call(ctx),
        },
        "(b) 10 hooks, all triggering": {
            "registry": registry_call(HookRegistry(noop), ctx),
            "hand-written": hand_written_call(noop, ctx),
            "no timeouts": hand_written_call(noop, ctx, _untimed),
        },
        "(c) engine-shaped, all triggering": {
            "registry": engine_registry_call(HookRegistry(engine)),
            "hand-written": engine_hand_written_call(engine),
            "no timeouts": engine_hand_written_call(engine, _untimed),
        },
    }
    print(
        f"{opts.calls} tool calls per measurement in batches of {opts.batch}, {opts.rounds} ABBA rounds; "
        "per tool call (Pre + tool + Post), median [min-max] over rounds.\n"
        "hand-written: each hook under asyncio.timeout (the targets' baseline); "
        "no timeouts: the same loop without (a floor, no target)"
    )
    failed = False
    measured: dict[str, dict[str, float]] = {}
    for label, contenders in cases.items():
        figures = await abba(contenders, opts.calls, opts.batch, opts.rounds)
        ratios = [r / h for r, h in zip(figures["registry"], figures["hand-written"], strict=True)]
        untimed = [r / u for r, u in zip(figures["registry"], figures["no timeouts"], strict=True)]
        measured[label] = {
            "registry": statistics.median(figures["registry"]),
            "ratio": statistics.median(ratios),
            "ratio_untimed": statistics.median(untimed),
        }
        if opts.json:
            continue
        if "bare" in figures:
            # A tool call makes two dispatches (run_pre_tool_use, run_post_tool_use).
            net = [r - b for r, b in zip(figures["registry"], figures["bare"], strict=True)]
            per_dispatch = [n / 2 for n in net]
            ok = statistics.median(per_dispatch) <= 3e-6
            verdict = (
                f"over the bare call {spread(net)} µs per tool call, {spread(per_dispatch)} µs per "
                f"dispatch (target <= 3 µs per dispatch) {'OK' if ok else 'OVER'}"
            )
        else:
            ok = statistics.median(ratios) <= 1.3
            verdict = f"registry / hand-written (target <= 1.3) {'OK' if ok else 'OVER'}"
        failed |= not ok
        print(
            f"{label}\n"
            f"  µs      registry {spread(figures['registry'])}"
            f" | hand-written {spread(figures['hand-written'])}"
            f" | no timeouts {spread(figures['no timeouts'])}\n"
            f"  ratios  registry / hand-written {spread(ratios, 1, 2)}"
            f" | registry / no timeouts {spread(untimed, 1, 2)}\n"
            f"  {verdict}",
            flush=True,
        )
    if opts.json:
        print(json.dumps(measured))
        return
    sys.exit(1 if failed else 0)


def against(opts: argparse.Namespace) -> int:
    """This tree's registry against revision ``opts.against``'s (module docstring)."""
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"this tree": [], opts.against: []}
    given = Path(opts.against)
    copied = given.is_dir()  # a directory holding an older hooks package: no git needed
    with tempfile.TemporaryDirectory(prefix="hook-dispatch-") as temp:
        old = given.resolve() if copied else Path(temp) / "tree"
        if not copied:
            subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(old), opts.against],
                           check=True, capture_output=True)  # fmt: skip
        sizes = ["--calls", str(opts.calls), "--batch", str(opts.batch), "--rounds", str(opts.rounds)]
        try:
            for pair in range(opts.pairs):
                order = [("this tree", HERE), (opts.against, old)]
                for name, tree in order if pair % 2 == 0 else order[::-1]:
                    argv = [sys.executable, __file__, "--hooks-from", str(tree), "--json", *sizes]
                    done = subprocess.run(argv, check=True, capture_output=True, text=True)
                    runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
        finally:
            if not copied:
                remove = ["git", "-C", str(HERE), "worktree", "remove", "--force", str(old)]
                subprocess.run(remove, check=False)
    print(
        f"this tree against {opts.against}: {opts.pairs} pairs of runs, alternated; per case the "
        "registry/hand-written ratio of this tree over that of the revision, median [min-max]"
    )
    failed = False
    for label in runs["this tree"][0]:
        mine = [run[label] for run in runs["this tree"]]
        theirs = [run[label] for run in runs[opts.against]]
        over = [m["ratio"] / t["ratio"] for m, t in zip(mine, theirs, strict=True)]
        # The same over the loop without timeouts (no target): the registry's own work, compared.
        untimed = [m["ratio_untimed"] / t["ratio_untimed"] for m, t in zip(mine, theirs, strict=True)]
        ok = statistics.median(over) <= 1.05
        failed |= not ok
        print(
            f"{label}\n"
            f"  µs      this tree {spread([m['registry'] for m in mine])} | "
            f"{opts.against} {spread([t['registry'] for t in theirs])}\n"
            f"  ratio over {opts.against}: against hand-written {spread(over, 1, 3)} "
            f"(target <= 1.05) {'OK' if ok else 'OVER'} | against no timeouts {spread(untimed, 1, 3)}",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    asyncio.run(main())
