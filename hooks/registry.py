"""The hook registry: runs the hooks of one point in order and fails closed.

Every hook point's chain, and the observers of a blocked call, run through one loop,
:func:`_chain`, which owns what they share: the clock and the timeouts, ``should_trigger``, a system
hook's events, failure notes and ``on_error``, the notes hooks return, and telemetry. What differs
by point (how an answer or a failure changes the outcome, whether the chain stops) is a fold,
:mod:`hooks.folds`, made per call and holding the call's state.

Every tool call runs two chains, so the per-hook path is kept short: what the registry reads of a
hook on every call (its timeout, its name, whether it filters with its own ``should_trigger``,
whether it is a system hook) is read once, when the registry is built, into one tuple per point;
a hook call arms no timer unless it suspends (:mod:`hooks.timeouts`); a context is copied only
when something in it changes.

Timeouts bind whatever the hook does (docs/design.md §1.1): the clock is read around every hook
(``should_trigger`` included; once per hook, each hook's end being the next one's start), and a
hook whose wall time passed its timeout counts as timed out even if it returned; its answer is
ignored. Code that may block (declared python hooks) is not run on the loop at all but in a hook
thread (:mod:`hooks.kinds.offloop`), where it suspends like any other hook and its timeout fires
on time.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterable
from typing import Any

from fimone import telemetry
from hooks.contract import Hook, HookContext, HookPoint, HookResult, RunEvents, SuspendRun, needs_approval
from hooks.folds import Fold, ObserverFold, PostFold, PreFold, StartFold, evolve
from hooks.outcomes import (
    BadHookResult,
    HookTimeout,
    PostToolUseOutcome,
    PreToolUseOutcome,
    SessionStartOutcome,
    SideEffect,
)
from hooks.shadow import ShadowHook
from hooks.timeouts import clock as _clock
from hooks.timeouts import finish, overran, stepped, timed, triggers

# Read once: looking a member up on its enum class costs several times a module global.
_PRE, _POST, _START = HookPoint.PRE_TOOL_USE, HookPoint.POST_TOOL_USE, HookPoint.SESSION_START

# The outcome of a call that went through is built field by field, every field set (checked at
# import in hooks.outcomes): half the cost of the dataclass __init__ with its ten arguments.
_new = object.__new__

# One hook in a point's chain, as the registry runs it: (hook, filters, timeout, system, name).
# ``filters`` is False when the hook keeps the base class's ``should_trigger`` (always True), which
# is then not called; ``system`` marks a system hook, fixed by its class.
_Slot = tuple[Hook, bool, float, bool, str]


def _lets_through(hook: Hook, exc: Exception) -> bool:
    """Whether a hook's failure lets the chain go on: only with ``on_error="allow"``, and never
    for a timeout of a hook that asks humans (the approval gate, docs/design.md §1.1)."""
    if hook.on_error != "allow":
        return False
    return not (isinstance(exc, HookTimeout) and getattr(hook, "asks_humans", False))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HookTimeout | BadHookResult):
        return str(exc)
    if isinstance(exc, SuspendRun):
        return "tried to suspend the run outside PreToolUse"
    text = str(exc)
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


def _not_a_result(result: Any) -> BadHookResult:
    return BadHookResult(f"returned {type(result).__name__} instead of HookResult")


def _note(
    name: str,
    point: HookPoint,
    started: float,
    ended: float,
    offset: float,
    decision: str,
    triggered: bool = True,
) -> None:
    """A hook's part of the chain, for telemetry (on only): clock readings made wall times. It is
    called inside the chain's ``try``, where whatever it raised would count as the hook failing:
    ``telemetry.hook_decided`` raises nothing (a fault of the telemetry never decides a call)."""
    telemetry.hook_decided(
        hook=name,
        point=point.value,
        started=started + offset,
        ended=ended + offset,
        decision=decision,
        triggered=triggered,
    )


async def _chain(
    slots: tuple[_Slot, ...], ctx: HookContext, fold: Fold, events: RunEvents | None = None
) -> HookContext:
    """Run the hooks of ``slots`` in order over ``ctx``, folding each one's answer into ``fold``:
    the one loop of every point, and of the observers of a blocked call.

    Per hook: its ``should_trigger`` (unless it keeps the base class's) and its call are held to
    its timeout together, from one clock read to the next; an answer that is not a
    ``HookResult``, or that came after the timeout, is a failure. A failure is noted (attributed
    to the hook) and lets the chain go on only as :func:`_lets_through` says; otherwise
    ``fold.failed`` decides. A ``SuspendRun`` stops the chain where ``fold.suspends``, and is a
    failure anywhere else. A system hook gets ``events`` on its own copy of the context.

    Returns the context as the last hook left it or, when the chain stopped early, as it was then
    (``fold`` holds why). ``CancelledError`` is not caught: cancelling the caller is not a failure.
    """
    # What the loop reads of the fold is read where it is used, on the paths that use it (a
    # failure, a note, telemetry): each attribute read up front would cost every call.
    call = fold.call
    floor = fold.needed is not None
    box: list[Any] | None = None  # where stepped puts hooks' answers, made when one triggers
    clock = _clock
    last = clock()  # each hook's end is the next one's start: one clock read per hook
    tracing = telemetry.ENABLED and fold.traced
    point = fold.point if tracing else _PRE  # read by telemetry's notes only
    offset = time.time() - last if tracing else 0.0
    for hook, filters, timeout, system, name in slots:
        # The need for approval is the fold's, whatever a hook wrote into its context in place.
        if floor and ctx.requires_confirmation is not fold.needed:
            ctx = evolve(ctx, confirm=fold.needed)
        started = last
        try:
            if filters:
                triggered = hook.should_trigger(ctx)
                if triggered is False or (
                    triggered is not True and not await triggers(triggered, started, timeout)
                ):
                    last = clock()
                    if last - started > timeout:
                        raise overran(timeout, last - started)
                    if tracing:
                        _note(name, point, started, last, offset, "skipped", triggered=False)
                    continue
            # A system hook gets the run's events on its own copy of the context (docs/design.md §1.10).
            hook_ctx = evolve(ctx, events=events) if system and events is not None else ctx
            if box is None:
                box = [None]
            steps = stepped(
                hook.execute(hook_ctx) if call is None else call(hook, hook_ctx, started, timeout), box
            )
            for pending in steps:  # it suspended: finish it within what is left of its timeout
                await finish(steps, pending, timeout - (clock() - started), timeout)
                break
            result = box[0]
            if not isinstance(result, HookResult):
                raise _not_a_result(result)
            last = clock()
            if last - started > timeout:
                raise overran(timeout, last - started)
            if tracing:
                _note(name, point, started, last, offset, fold.decision(result))
        except Exception as exc:
            if fold.suspends and isinstance(exc, SuspendRun):  # neither allowed nor blocked: parked
                if tracing:
                    _note(name, point, started, clock(), offset, "suspend")
                fold.suspension = exc
                return ctx
            exc, last = timed(timeout, fold.failure(exc, timeout), started)
            why = _describe(exc)
            fold.effects.append(SideEffect(name, f"hook {name} {why}", failure=True))
            lets_through = _lets_through(hook, exc)
            if tracing:
                _note(name, point, started, last, offset, "failed_open" if lets_through else "failed")
            if lets_through:
                continue
            after = fold.failed(name, why, ctx)
            if after is None:
                return ctx
            ctx = after
            continue
        if result.side_effects:  # cheaper than iterating an empty list
            if type(hook) is ShadowHook:  # its notes are whole SideEffects (hooks.shadow)
                fold.effects.extend(result.side_effects)  # type: ignore[arg-type]
            else:
                effects = fold.effects
                for message in result.side_effects:
                    effects.append(SideEffect(name, str(message)))
        after = fold.take(result, name, system, ctx)
        if after is None:
            return ctx
        ctx = after
    return ctx


def _slot(hook: Hook) -> _Slot:
    """What the registry reads of ``hook`` on every call, read once."""
    filters = getattr(type(hook), "should_trigger", None) is not Hook.should_trigger or (
        "should_trigger" in getattr(hook, "__dict__", ())
    )
    system = getattr(type(hook), "system", False) is True
    return (hook, filters, hook.timeout, system, hook.hook_name)


class HookRegistry:
    """An immutable, ordered set of hooks, safe to share between concurrent tool calls.

    The registry keeps no per-call state: every ``run_*`` call works on its own fold, and a
    rewrite of arguments or result goes onto a copy of the context, so two concurrent calls never
    see each other's arguments. The only write to the caller's context is stamping ``hook_point``.

    What it needs of each hook on every call is read once, here: its ``timeout``, its name, and
    whether it is a *system* hook (whose ``approved_args_sha256`` counts), the latter from its
    class: an instance cannot promote itself later.
    """

    __slots__ = ("_hooks", "_observers", "_post", "_pre", "_start")

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        listed = list(hooks)
        for hook in listed:
            if not isinstance(hook, Hook) or getattr(hook, "point", None) not in HookPoint:
                raise TypeError(f"{hook!r} is not a PreToolUse, PostToolUse or SessionStart hook")
            if not inspect.iscoroutinefunction(hook.execute):
                raise TypeError(f"hook {hook.hook_name!r}: execute() must be declared 'async def'")
        # By band, then priority (docs/design.md §1.12: guards, the agent's hooks, the organisation's
        # enforced hooks, the gate); sorted() is stable: equal keys keep declaration order.
        ordered = tuple(sorted(listed, key=lambda h: (h.band, h.priority)))
        set_ = object.__setattr__
        set_(self, "_hooks", ordered)
        set_(self, "_pre", tuple(_slot(h) for h in ordered if h.point is _PRE))
        set_(self, "_post", tuple(_slot(h) for h in ordered if h.point is _POST))
        set_(self, "_start", tuple(_slot(h) for h in ordered if h.point is _START))
        observers = (h for h in ordered if getattr(h, "observes_blocked_calls", False))
        set_(self, "_observers", tuple(_slot(h) for h in observers))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("HookRegistry is immutable once built")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("HookRegistry is immutable once built")

    @property
    def hooks(self) -> tuple[Hook, ...]:
        return self._hooks

    def __len__(self) -> int:
        return len(self._hooks)

    def __repr__(self) -> str:
        return f"<HookRegistry {[h.hook_name for h in self._hooks]}>"

    async def run_pre_tool_use(
        self, ctx: HookContext, *, events: RunEvents | None = None
    ) -> PreToolUseOutcome:
        """Run PreToolUse hooks; rewritten args flow on; the first ``allow=False`` stops the chain.

        ``events`` reaches system hooks only (as ``ctx.events``); every other hook sees ``None``,
        whatever the caller's context carried.

        The need for approval only grows along the chain: it starts from the engine's facts and
        every ``HookResult(require_confirmation=True)`` adds to it; each hook is handed the
        registry's own value, so what a hook writes into its context cannot lower it. A blocked
        call is then told to the hooks that observe blocked calls.
        """
        ctx.hook_point = _PRE
        if ctx.events is not None:
            ctx = evolve(ctx, events=None)
        fold = PreFold(needs_approval(ctx))
        ctx = await _chain(self._pre, ctx, fold, events)
        if fold.suspension is not None:
            return PreToolUseOutcome(
                allow=False, tool_args=ctx.tool_args, suspension=fold.suspension, side_effects=fold.effects
            )
        if fold.blocked_by is not None:
            return await self._blocked(ctx, fold, fold.blocked_by)
        out = _new(PreToolUseOutcome)  # every field, without the dataclass __init__
        out.allow = True
        out.tool_args = ctx.tool_args
        out.error = out.blocked_by = out.suspension = None
        out.side_effects = fold.effects
        out.approved_args_sha256 = fold.approved
        out.requires_confirmation = fold.needed
        out.confirmation_requested_by = fold.asked
        out.confirmation_request_id = fold.request_id
        return out

    async def _blocked(self, ctx: HookContext, fold: PreFold, blocked_by: str) -> PreToolUseOutcome:
        """The outcome of a call ``blocked_by`` a hook (``fold`` as the chain stopped), once the
        observers of blocked calls (an audit log) were told: each is held to its timeout like any
        hook (``should_trigger`` included, an answer after it a timeout all the same); a failure is
        noted in the trace and changes nothing: the call stays blocked."""
        await _chain(self._observers, ctx, ObserverFold(fold.effects, blocked_by, fold.error))
        return PreToolUseOutcome(
            allow=False,
            tool_args=ctx.tool_args,
            error=fold.error,
            blocked_by=blocked_by,
            side_effects=fold.effects,
            requires_confirmation=fold.needed,
            confirmation_requested_by=fold.asked,
        )

    async def run_post_tool_use(self, ctx: HookContext) -> PostToolUseOutcome:
        """Run PostToolUse hooks over ``ctx.tool_result``; ``modified_result`` chains.

        A failing hook replaces the observation with an error notice, so a crashed redaction hook
        never lets the raw result through; later hooks see the notice.
        """
        ctx.hook_point = _POST
        if ctx.events is not None:  # given to system PreToolUse hooks only
            ctx = evolve(ctx, events=None)
        fold = PostFold()
        ctx = await _chain(self._post, ctx, fold)
        out = _new(PostToolUseOutcome)  # every field, without the dataclass __init__
        out.result = ctx.tool_result
        out.side_effects = fold.effects
        out.failed_hooks = fold.failed_hooks
        return out

    async def run_session_start(self, ctx: HookContext) -> SessionStartOutcome:
        """Run SessionStart hooks; collect ``additional_context`` in order; a failure stops the run."""
        ctx.hook_point = _START
        if ctx.events is not None:  # given to system PreToolUse hooks only
            ctx = evolve(ctx, events=None)
        fold = StartFold()
        await _chain(self._start, ctx, fold)
        if fold.failed_by is not None:
            return SessionStartOutcome(
                ok=False,
                additional_context=fold.pieces,
                error=fold.error,
                failed_by=fold.failed_by,
                side_effects=fold.effects,
            )
        return SessionStartOutcome(ok=True, additional_context=fold.pieces, side_effects=fold.effects)
