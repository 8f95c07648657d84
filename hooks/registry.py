"""The hook registry: runs the hooks of one point in order and fails closed.

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

import asyncio
import inspect
import time
from collections.abc import Iterable
from typing import Any

from fimone import telemetry
from hooks.contract import Hook, HookContext, HookPoint, HookResult, RunEvents, SuspendRun
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


def _shadow_decision(result: HookResult) -> str | None:
    """What a hook in shadow mode would have done, from its note (``hooks.shadow``), if anything."""
    for note in result.side_effects:
        if type(note) is SideEffect and note.shadow is not None:
            return f"shadow_{note.shadow['decision']}"
    return None


def _pre_decision(result: HookResult) -> str:
    if result.side_effects and (shadow := _shadow_decision(result)):
        return shadow
    if not result.allow:
        return "block"
    if result.require_confirmation is True:
        return "ask"
    return "rewrite" if result.modified_args is not None else "allow"


_KEEP: Any = object()


def _evolve(
    ctx: HookContext,
    *,
    tool_args: Any = _KEEP,
    tool_result: Any = _KEEP,
    confirm: Any = _KEEP,
    events: Any = _KEEP,
) -> HookContext:
    """A copy of ``ctx`` with new args, result, need for approval or events, several times cheaper
    than ``dataclasses.replace`` (this runs on every rewrite of every tool call)."""
    new = object.__new__(HookContext)
    new.tool_name = ctx.tool_name
    new.tool_args = ctx.tool_args if tool_args is _KEEP else tool_args
    new.agent_id = ctx.agent_id
    new.user_id = ctx.user_id
    new.metadata = ctx.metadata
    new.tool_result = ctx.tool_result if tool_result is _KEEP else tool_result
    new.hook_point = ctx.hook_point
    new.requires_confirmation = ctx.requires_confirmation if confirm is _KEEP else confirm
    new.confirmation_request_id = ctx.confirmation_request_id
    new.events = ctx.events if events is _KEEP else events
    new.tool_schema = ctx.tool_schema
    return new


# _evolve() must copy every field: fail at import if HookContext grows one it does not know.
assert tuple(HookContext.__dataclass_fields__) == (
    "tool_name",
    "tool_args",
    "agent_id",
    "user_id",
    "metadata",
    "tool_result",
    "hook_point",
    "requires_confirmation",
    "confirmation_request_id",
    "events",
    "tool_schema",
), "update hooks.registry._evolve for the new HookContext field"


def _slot(hook: Hook) -> _Slot:
    """What the registry reads of ``hook`` on every call, read once."""
    filters = getattr(type(hook), "should_trigger", None) is not Hook.should_trigger or (
        "should_trigger" in getattr(hook, "__dict__", ())
    )
    system = getattr(type(hook), "system", False) is True
    return (hook, filters, hook.timeout, system, hook.hook_name)


class HookRegistry:
    """An immutable, ordered set of hooks, safe to share between concurrent tool calls.

    The registry keeps no per-call state: every ``run_*`` call works on its own locals, and a
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
        set_(self, "_observers", tuple(h for h in ordered if getattr(h, "observes_blocked_calls", False)))

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
            ctx = _evolve(ctx, events=None)
        meta = ctx.metadata
        needed = bool(
            ctx.requires_confirmation
            or meta.get("requires_confirmation")
            or meta.get("require_confirmation_for_all")
        )
        effects: list[SideEffect] = []
        asked: list[str] = []
        approved: str | None = None
        request_id: str | None = None
        box: list[Any] | None = None  # where stepped puts hooks' answers, made when one triggers
        clock = _clock
        last = clock()  # each hook's end is the next one's start: one clock read per hook
        tracing = telemetry.ENABLED
        offset = time.time() - last if tracing else 0.0
        for hook, filters, timeout, system, name in self._pre:
            if ctx.requires_confirmation is not needed:
                ctx = _evolve(ctx, confirm=needed)
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
                            _note(name, _PRE, started, last, offset, "skipped", triggered=False)
                        continue
                # A system hook gets the run's events on its own copy of the context (docs/design.md §1.10).
                hook_ctx = _evolve(ctx, events=events) if system and events is not None else ctx
                if box is None:
                    box = [None]
                steps = stepped(hook.execute(hook_ctx), box)
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
                    _note(name, _PRE, started, last, offset, _pre_decision(result))
            except SuspendRun as suspension:
                if tracing:
                    _note(name, _PRE, started, clock(), offset, "suspend")
                return PreToolUseOutcome(
                    allow=False, tool_args=ctx.tool_args, suspension=suspension, side_effects=effects
                )
            except Exception as exc:
                exc, last = timed(timeout, exc, started)
                effects.append(SideEffect(name, f"hook {name} {_describe(exc)}", failure=True))
                lets_through = _lets_through(hook, exc)
                if tracing:
                    _note(name, _PRE, started, last, offset, "failed_open" if lets_through else "failed")
                if lets_through:
                    continue
                error = f"Tool call blocked: the safety check '{name}' could not complete."
                return await self._blocked(ctx, name, error, effects, needed, asked)
            if result.side_effects:  # cheaper than iterating an empty list
                if type(hook) is ShadowHook:  # its notes are whole SideEffects (hooks.shadow)
                    effects.extend(result.side_effects)  # type: ignore[arg-type]
                else:
                    for message in result.side_effects:
                        effects.append(SideEffect(name, str(message)))
            if not result.allow:
                error = result.error or f"Tool call blocked by '{name}'."
                return await self._blocked(ctx, name, error, effects, needed, asked)
            if result.require_confirmation is True:
                needed = True
                asked.append(name)
                reason = result.confirmation_reason or "the call meets its conditions"
                effects.append(SideEffect(name, f"asked for human approval: {reason}"))
            if system:  # what the gate tells the engine counts from system hooks only
                if result.approved_args_sha256 is not None:
                    approved = str(result.approved_args_sha256)
                if result.confirmation_request_id is not None:
                    request_id = str(result.confirmation_request_id)
            if result.modified_args is not None:
                ctx = _evolve(ctx, tool_args=result.modified_args)
        out = _new(PreToolUseOutcome)  # every field, without the dataclass __init__
        out.allow = True
        out.tool_args = ctx.tool_args
        out.error = out.blocked_by = out.suspension = None
        out.side_effects = effects
        out.approved_args_sha256 = approved
        out.requires_confirmation = needed
        out.confirmation_requested_by = asked
        out.confirmation_request_id = request_id
        return out

    async def _blocked(
        self,
        ctx: HookContext,
        blocked_by: str,
        error: str,
        effects: list[SideEffect],
        needed: bool,
        asked: list[str],
    ) -> PreToolUseOutcome:
        """The outcome of a call ``blocked_by`` a hook, once the observers of blocked calls (an
        audit log) were told. Each observer runs under its own timeout, ``should_trigger``
        included, and one that answers after it timed out all the same; a failure is reported in
        the trace and changes nothing: the call stays blocked."""
        for hook in self._observers:
            timeout = hook.timeout
            started = _clock()
            try:
                triggered = hook.should_trigger(ctx)
                if triggered is True or (
                    triggered is not False and await triggers(triggered, started, timeout)
                ):
                    budget = timeout - (_clock() - started)
                    if budget <= 0:
                        raise HookTimeout(f"timed out after {timeout:g} s")
                    async with asyncio.timeout(budget):
                        await hook.on_blocked(ctx, blocked_by=blocked_by, error=error)
                elapsed = _clock() - started
                if elapsed > timeout:
                    raise overran(timeout, elapsed)
            except TimeoutError:
                name = hook.hook_name
                effects.append(SideEffect(name, f"hook {name} timed out after {timeout:g} s", failure=True))
            except Exception as exc:
                exc, _ = timed(timeout, exc, started)
                name = hook.hook_name
                effects.append(SideEffect(name, f"hook {name} {_describe(exc)}", failure=True))
        return PreToolUseOutcome(
            allow=False,
            tool_args=ctx.tool_args,
            error=error,
            blocked_by=blocked_by,
            side_effects=effects,
            requires_confirmation=needed,
            confirmation_requested_by=asked,
        )

    async def run_post_tool_use(self, ctx: HookContext) -> PostToolUseOutcome:
        """Run PostToolUse hooks over ``ctx.tool_result``; ``modified_result`` chains.

        A failing hook replaces the observation with an error notice, so a crashed redaction hook
        never lets the raw result through; later hooks see the notice.
        """
        ctx.hook_point = _POST
        if ctx.events is not None:  # given to system PreToolUse hooks only
            ctx = _evolve(ctx, events=None)
        effects: list[SideEffect] = []
        failed: list[str] = []
        box: list[Any] | None = None  # where stepped puts hooks' answers, made when one triggers
        clock = _clock
        last = clock()  # each hook's end is the next one's start: one clock read per hook
        tracing = telemetry.ENABLED
        offset = time.time() - last if tracing else 0.0
        for hook, filters, timeout, _system, name in self._post:
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
                            _note(name, _POST, started, last, offset, "skipped", triggered=False)
                        continue
                if box is None:
                    box = [None]
                steps = stepped(hook.execute(ctx), box)
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
                    _note(
                        name,
                        _POST,
                        started,
                        last,
                        offset,
                        "rewrite"
                        if result.modified_result is not None
                        else (result.side_effects and _shadow_decision(result)) or "allow",
                    )
            except Exception as exc:  # SuspendRun included: it has no meaning here
                exc, last = timed(timeout, exc, started)
                effects.append(SideEffect(name, f"hook {name} {_describe(exc)}", failure=True))
                lets_through = _lets_through(hook, exc)
                if tracing:
                    _note(name, _POST, started, last, offset, "failed_open" if lets_through else "failed")
                if lets_through:
                    continue
                failed.append(name)
                notice = (
                    f"[The tool's result was withheld: the post-processing check '{name}' "
                    "could not complete.]"
                )
                ctx = _evolve(ctx, tool_result=notice)
                continue
            if result.side_effects:  # cheaper than iterating an empty list
                if type(hook) is ShadowHook:  # its notes are whole SideEffects (hooks.shadow)
                    effects.extend(result.side_effects)  # type: ignore[arg-type]
                else:
                    for message in result.side_effects:
                        effects.append(SideEffect(name, str(message)))
            if result.modified_result is not None:
                ctx = _evolve(ctx, tool_result=result.modified_result)
        out = _new(PostToolUseOutcome)  # every field, without the dataclass __init__
        out.result = ctx.tool_result
        out.side_effects = effects
        out.failed_hooks = failed
        return out

    async def run_session_start(self, ctx: HookContext) -> SessionStartOutcome:
        """Run SessionStart hooks; collect ``additional_context`` in order; a failure stops the run."""
        ctx.hook_point = _START
        if ctx.events is not None:  # given to system PreToolUse hooks only
            ctx = _evolve(ctx, events=None)
        effects: list[SideEffect] = []
        pieces: list[str] = []
        box: list[Any] | None = None  # where stepped puts hooks' answers, made when one triggers
        clock = _clock
        last = clock()  # each hook's end is the next one's start: one clock read per hook
        tracing = telemetry.ENABLED
        offset = time.time() - last if tracing else 0.0
        for hook, filters, timeout, _system, name in self._start:
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
                            _note(name, _START, started, last, offset, "skipped", triggered=False)
                        continue
                if box is None:
                    box = [None]
                steps = stepped(hook.execute(ctx), box)
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
                    decision = (result.side_effects and _shadow_decision(result)) or "allow"
                    _note(name, _START, started, last, offset, decision)
            except Exception as exc:
                exc, last = timed(timeout, exc, started)
                effects.append(SideEffect(name, f"hook {name} {_describe(exc)}", failure=True))
                lets_through = _lets_through(hook, exc)
                if tracing:
                    _note(name, _START, started, last, offset, "failed_open" if lets_through else "failed")
                if lets_through:
                    continue
                return SessionStartOutcome(
                    ok=False,
                    additional_context=pieces,
                    error=f"The run could not start: the session hook '{name}' {_describe(exc)}.",
                    failed_by=name,
                    side_effects=effects,
                )
            if result.side_effects:  # cheaper than iterating an empty list
                if type(hook) is ShadowHook:  # its notes are whole SideEffects (hooks.shadow)
                    effects.extend(result.side_effects)  # type: ignore[arg-type]
                else:
                    for message in result.side_effects:
                        effects.append(SideEffect(name, str(message)))
            if result.additional_context:
                pieces.append(result.additional_context)
        return SessionStartOutcome(ok=True, additional_context=pieces, side_effects=effects)
