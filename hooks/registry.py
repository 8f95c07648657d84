"""The hook registry: runs the hooks of one point in order and fails closed.

Performance note: most hooks finish without ever suspending (a dict lookup, a regex). Wrapping each
call in ``asyncio.wait_for`` would arm an event-loop timer per hook per tool call. Instead the
registry takes the coroutine's first step by hand; only a hook that actually suspends is finished
under ``asyncio.timeout``, armed with what is left of the hook's timeout.

Timeouts bind whatever the hook does (DESIGN §1.1). A hook that blocks the thread without
suspending cannot be interrupted by any asyncio timeout, so the registry also reads the clock
around every hook (``should_trigger`` included; one ``perf_counter()`` per hook, shared with the
next one): a hook whose wall time passed its timeout counts as timed out even if it returned, and
its answer is ignored. Code that may block (declared python hooks) is not run on the loop at all
but in a hook thread (:mod:`hooks.kinds.offloop`), where it suspends like any other hook and its
timeout fires on time.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import types
from collections.abc import Awaitable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from hooks.contract import Hook, HookContext, HookPoint, HookResult, RunEvents, SuspendRun


@dataclass(slots=True, frozen=True)
class SideEffect:
    """One note for the run's trace, attributed to the hook that produced it."""

    hook: str
    message: str
    failure: bool = False


@dataclass(slots=True)
class PreToolUseOutcome:
    """``allow`` and the final ``tool_args``; when blocked, ``error`` is the LLM's observation.

    ``suspension`` is set when a hook could not answer yet: the call is neither allowed nor
    blocked, and the engine parks the run.

    ``approved_args_sha256`` is the hash of the arguments a human approved, taken only from a
    system hook's :attr:`HookResult.approved_args_sha256` (the approval gate's), never from
    ``metadata``; ``None`` when no approval was involved. The engine refuses to run arguments
    whose hash differs. ``confirmation_request_id`` (the request that approved) comes the same way.

    ``requires_confirmation`` is the call's final need for a human's approval (the engine's facts,
    or a hook that asked with ``HookResult(require_confirmation=True)``: those hooks are named in
    ``confirmation_requested_by``).
    """

    allow: bool
    tool_args: dict[str, Any]
    error: str | None = None
    blocked_by: str | None = None
    suspension: SuspendRun | None = None
    side_effects: list[SideEffect] = field(default_factory=list)
    approved_args_sha256: str | None = None
    requires_confirmation: bool = False
    confirmation_requested_by: list[str] = field(default_factory=list)
    confirmation_request_id: str | None = None

    @property
    def suspended(self) -> bool:
        return self.suspension is not None


@dataclass(slots=True)
class PostToolUseOutcome:
    """The observation after every PostToolUse hook; ``failed_hooks`` names hooks that failed."""

    result: Any
    side_effects: list[SideEffect] = field(default_factory=list)
    failed_hooks: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SessionStartOutcome:
    """``additional_context`` pieces in hook order; ``ok=False`` means the run must not start."""

    ok: bool
    additional_context: list[str] = field(default_factory=list)
    error: str | None = None
    failed_by: str | None = None
    side_effects: list[SideEffect] = field(default_factory=list)


class HookTimeout(Exception):
    """A hook did not finish within its timeout (or was not started because earlier calls of it
    are still running past theirs). Never read as ``on_error="allow"`` for a hook that asks
    humans (the approval gate)."""


class BadHookResult(TypeError):
    """A hook answered something that is not a :class:`HookResult`."""


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], pending: Any) -> Any:
    """Finish driving a coroutine whose first step already ran, exactly as ``await`` would."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # cancellation included: forward it into the hook
            try:
                pending = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as stop:
                return stop.value


_clock = time.perf_counter


def _overran(hook: Hook, elapsed: float) -> HookTimeout:
    """What a hook that answered after its timeout failed with: it timed out (DESIGN §1.1)."""
    return HookTimeout(
        f"timed out after {hook.timeout:g} s (it ran for {elapsed:.2f} s; its answer is ignored)"
    )


def _lets_through(hook: Hook, exc: Exception) -> bool:
    """Whether a hook's failure lets the chain go on: only with ``on_error="allow"``, and never
    for a timeout of a hook that asks humans (the approval gate, DESIGN §1.1)."""
    if hook.on_error != "allow":
        return False
    return not (isinstance(exc, HookTimeout) and getattr(hook, "asks_humans", False))


def _timed(hook: Hook, exc: Exception, started: float) -> tuple[Exception, float]:
    """The failure to report for a hook that failed, and the clock: a hook that failed after its
    timeout timed out, whatever it raised."""
    now = _clock()
    elapsed = now - started
    if elapsed > hook.timeout and not isinstance(exc, HookTimeout):
        return _overran(hook, elapsed), now
    return exc, now


async def _finish(coro: Coroutine[Any, Any, Any], pending: Any, budget: float, timeout: float) -> Any:
    """Finish a suspended hook coroutine within ``budget``, what is left of its ``timeout``."""
    if budget <= 0:
        coro.close()
        raise HookTimeout(f"timed out after {timeout:g} s")
    try:
        async with asyncio.timeout(budget) as scope:
            return await _resume(coro, pending)
    except TimeoutError:
        if scope.expired():
            raise HookTimeout(f"timed out after {timeout:g} s") from None
        raise


async def _settle(value: Any, budget: float, timeout: float) -> Any:
    """Await ``value`` if it is awaitable (an ``async def should_trigger``), within ``budget``
    (what is left of ``timeout``)."""
    if type(value) is bool or not inspect.isawaitable(value):
        return value
    if inspect.iscoroutine(value):
        try:
            pending = value.send(None)
        except StopIteration as stop:
            return stop.value
        return await _finish(value, pending, budget, timeout)
    return await _finish(_await(value), None, budget, timeout)


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HookTimeout | BadHookResult):
        return str(exc)
    if isinstance(exc, SuspendRun):
        return "tried to suspend the run outside PreToolUse"
    text = str(exc)
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


class _Pending:
    """A hook call that suspended (or whose ``should_trigger`` is async): finish it with ``await``."""

    __slots__ = ("coro", "ctx", "hook", "step", "trigger")

    def __init__(
        self, hook: Hook, ctx: HookContext, *, coro: Any = None, step: Any = None, trigger: Any = None
    ):
        self.hook, self.ctx, self.coro, self.step, self.trigger = hook, ctx, coro, step, trigger

    async def finish(self, started: float) -> HookResult | None:
        """The hook's answer (``None``: it did not trigger), within what is left of its timeout
        since ``started`` (the clock before its ``should_trigger``)."""
        hook = self.hook
        timeout = hook.timeout
        if self.coro is None:
            if not await _settle(self.trigger, timeout - (_clock() - started), timeout):
                return None
            begun = _begin_execute(hook, self.ctx)
            if type(begun) is not _Pending:
                return begun
            self.coro, self.step = begun.coro, begun.step
        return _checked(await _finish(self.coro, self.step, timeout - (_clock() - started), timeout))


def _checked(result: Any) -> HookResult:
    if not isinstance(result, HookResult):
        raise BadHookResult(f"returned {type(result).__name__} instead of HookResult")
    return result


def _begin_execute(hook: Hook, ctx: HookContext) -> HookResult | _Pending:
    coro = hook.execute(ctx)
    try:
        step = coro.send(None)
    except StopIteration as stop:
        return _checked(stop.value)
    return _Pending(hook, ctx, coro=coro, step=step)


def _begin(hook: Hook, ctx: HookContext, triggered: Any) -> HookResult | _Pending | None:
    """Start one hook call, given what its ``should_trigger`` answered, without arming any timer.

    Returns ``None`` when the hook does not trigger, its checked ``HookResult`` when it finished
    without suspending, or a :class:`_Pending` to ``await .finish()`` (under the hook's timeout).
    Raises whatever the hook raised, or :class:`BadHookResult`.
    """
    if triggered is not True:
        if triggered is False:
            return None
        if not inspect.isawaitable(triggered):
            return _begin_execute(hook, ctx) if triggered else None
        return _Pending(hook, ctx, trigger=triggered)
    return _begin_execute(hook, ctx)


_KEEP: Any = object()


def _evolve(
    ctx: HookContext,
    *,
    tool_args: Any = _KEEP,
    tool_result: Any = _KEEP,
    confirm: Any = _KEEP,
    events: Any = _KEEP,
) -> HookContext:
    """A copy of ``ctx`` with new args or result, several times cheaper than ``dataclasses.replace``
    (this runs on every rewrite of every tool call)."""
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
), "update hooks.registry._evolve for the new HookContext field"


class HookRegistry:
    """An immutable, ordered set of hooks, safe to share between concurrent tool calls.

    The registry keeps no per-call state: every ``run_*`` call works on its own locals, and a
    rewrite of arguments or result goes onto a copy of the context, so two concurrent calls never
    see each other's arguments. The only write to the caller's context is stamping ``hook_point``.

    Which hooks are *system* hooks (whose ``approved_args_sha256`` counts) is fixed when the
    registry is built, from their classes: an instance cannot promote itself later.
    """

    __slots__ = ("_hooks", "_observers", "_post", "_pre", "_start", "_system")

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        listed = list(hooks)
        for hook in listed:
            if not isinstance(hook, Hook) or getattr(hook, "point", None) not in HookPoint:
                raise TypeError(f"{hook!r} is not a PreToolUse, PostToolUse or SessionStart hook")
            if not inspect.iscoroutinefunction(hook.execute):
                raise TypeError(f"hook {hook.hook_name!r}: execute() must be declared 'async def'")
        # By band, then priority (DESIGN §1.12: guards, the agent's hooks, the organisation's
        # enforced hooks, the gate); sorted() is stable: equal keys keep declaration order.
        ordered = tuple(sorted(listed, key=lambda h: (h.band, h.priority)))
        set_ = object.__setattr__
        set_(self, "_hooks", ordered)
        set_(self, "_pre", tuple(h for h in ordered if h.point is HookPoint.PRE_TOOL_USE))
        set_(self, "_post", tuple(h for h in ordered if h.point is HookPoint.POST_TOOL_USE))
        set_(self, "_start", tuple(h for h in ordered if h.point is HookPoint.SESSION_START))
        set_(self, "_observers", tuple(h for h in ordered if getattr(h, "observes_blocked_calls", False)))
        set_(self, "_system", frozenset(id(h) for h in ordered if getattr(type(h), "system", False) is True))

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
        ctx.hook_point = HookPoint.PRE_TOOL_USE
        if ctx.events is not None:
            ctx = _evolve(ctx, events=None)
        effects: list[SideEffect] = []
        approved: str | None = None
        meta = ctx.metadata
        needed = bool(
            ctx.requires_confirmation
            or meta.get("requires_confirmation")
            or meta.get("require_confirmation_for_all")
        )
        asked: list[str] = []
        request_id: str | None = None
        clock = _clock
        last = clock()  # each hook's end is the next one's start: one clock read per hook
        for hook in self._pre:
            if ctx.requires_confirmation is not needed:
                ctx = _evolve(ctx, confirm=needed)
            started = last
            try:
                # should_trigger is called here, not in _begin: most hooks do not trigger, and
                # this path then costs one call instead of two.
                triggered = hook.should_trigger(ctx)
                if triggered is False:
                    last = clock()
                    if last - started > hook.timeout:
                        raise _overran(hook, last - started)
                    continue
                system = id(hook) in self._system
                hook_ctx = _evolve(ctx, events=events) if system and events is not None else ctx
                result = _begin(hook, hook_ctx, triggered)
                if type(result) is _Pending:
                    result = await result.finish(started)
                last = clock()
                if last - started > hook.timeout:
                    raise _overran(hook, last - started)
            except SuspendRun as suspension:
                return PreToolUseOutcome(
                    allow=False, tool_args=ctx.tool_args, suspension=suspension, side_effects=effects
                )
            except Exception as exc:
                exc, last = _timed(hook, exc, started)
                name = hook.hook_name
                effects.append(SideEffect(name, f"hook {name} {_describe(exc)}", failure=True))
                if _lets_through(hook, exc):
                    continue
                error = f"Tool call blocked: the safety check '{name}' could not complete."
                await self._tell_blocked(ctx, name, error, effects)
                return PreToolUseOutcome(
                    allow=False,
                    tool_args=ctx.tool_args,
                    error=error,
                    blocked_by=name,
                    side_effects=effects,
                    requires_confirmation=needed,
                    confirmation_requested_by=asked,
                )
            if result is None:
                continue
            if result.side_effects:
                effects.extend(SideEffect(hook.hook_name, str(m)) for m in result.side_effects)
            if not result.allow:
                error = result.error or f"Tool call blocked by '{hook.hook_name}'."
                await self._tell_blocked(ctx, hook.hook_name, error, effects)
                return PreToolUseOutcome(
                    allow=False,
                    tool_args=ctx.tool_args,
                    error=error,
                    blocked_by=hook.hook_name,
                    side_effects=effects,
                    requires_confirmation=needed,
                    confirmation_requested_by=asked,
                )
            if result.require_confirmation is True:
                needed = True
                asked.append(hook.hook_name)
                reason = result.confirmation_reason or "the call meets its conditions"
                effects.append(SideEffect(hook.hook_name, f"asked for human approval: {reason}"))
            if system:  # what the gate tells the engine counts from system hooks only
                if result.approved_args_sha256 is not None:
                    approved = str(result.approved_args_sha256)
                if result.confirmation_request_id is not None:
                    request_id = str(result.confirmation_request_id)
            if result.modified_args is not None:
                ctx = _evolve(ctx, tool_args=result.modified_args)
        return PreToolUseOutcome(
            allow=True,
            tool_args=ctx.tool_args,
            side_effects=effects,
            approved_args_sha256=approved,
            requires_confirmation=needed,
            confirmation_requested_by=asked,
            confirmation_request_id=request_id,
        )

    async def _tell_blocked(
        self, ctx: HookContext, blocked_by: str, error: str, effects: list[SideEffect]
    ) -> None:
        """Tell the observers of blocked calls (an audit log). Each runs under its own timeout,
        ``should_trigger`` included, and one that answers after it timed out all the same; a
        failure is reported in the trace and changes nothing: the call stays blocked."""
        for hook in self._observers:
            timeout = hook.timeout
            started = _clock()
            try:
                triggered = await _settle(hook.should_trigger(ctx), timeout - (_clock() - started), timeout)
                if triggered:
                    budget = timeout - (_clock() - started)
                    if budget <= 0:
                        raise HookTimeout(f"timed out after {timeout:g} s")
                    async with asyncio.timeout(budget):
                        await hook.on_blocked(ctx, blocked_by=blocked_by, error=error)
                elapsed = _clock() - started
                if elapsed > timeout:
                    raise _overran(hook, elapsed)
            except TimeoutError:
                name = hook.hook_name
                effects.append(SideEffect(name, f"hook {name} timed out after {timeout:g} s", failure=True))
            except Exception as exc:
                exc, _ = _timed(hook, exc, started)
                name = hook.hook_name
                effects.append(SideEffect(name, f"hook {name} {_describe(exc)}", failure=True))

    async def run_post_tool_use(self, ctx: HookContext) -> PostToolUseOutcome:
        """Run PostToolUse hooks over ``ctx.tool_result``; ``modified_result`` chains.

        A failing hook replaces the observation with an error notice, so a crashed redaction hook
        never lets the raw result through; later hooks see the notice.
        """
        ctx.hook_point = HookPoint.POST_TOOL_USE
        if ctx.events is not None:  # given to system PreToolUse hooks only
            ctx = _evolve(ctx, events=None)
        effects: list[SideEffect] = []
        failed: list[str] = []
        clock = _clock
        last = clock()  # each hook's end is the next one's start: one clock read per hook
        for hook in self._post:
            started = last
            try:
                # should_trigger is called here, not in _begin: most hooks do not trigger, and
                # this path then costs one call instead of two.
                triggered = hook.should_trigger(ctx)
                if triggered is False:
                    last = clock()
                    if last - started > hook.timeout:
                        raise _overran(hook, last - started)
                    continue
                result = _begin(hook, ctx, triggered)
                if type(result) is _Pending:
                    result = await result.finish(started)
                last = clock()
                if last - started > hook.timeout:
                    raise _overran(hook, last - started)
            except Exception as exc:  # SuspendRun included: it has no meaning here
                exc, last = _timed(hook, exc, started)
                name = hook.hook_name
                effects.append(SideEffect(name, f"hook {name} {_describe(exc)}", failure=True))
                if _lets_through(hook, exc):
                    continue
                failed.append(name)
                notice = (
                    f"[The tool's result was withheld: the post-processing check '{name}' "
                    "could not complete.]"
                )
                ctx = _evolve(ctx, tool_result=notice)
                continue
            if result is None:
                continue
            if result.side_effects:
                effects.extend(SideEffect(hook.hook_name, str(m)) for m in result.side_effects)
            if result.modified_result is not None:
                ctx = _evolve(ctx, tool_result=result.modified_result)
        return PostToolUseOutcome(result=ctx.tool_result, side_effects=effects, failed_hooks=failed)

    async def run_session_start(self, ctx: HookContext) -> SessionStartOutcome:
        """Run SessionStart hooks; collect ``additional_context`` in order; a failure stops the run."""
        ctx.hook_point = HookPoint.SESSION_START
        if ctx.events is not None:  # given to system PreToolUse hooks only
            ctx = _evolve(ctx, events=None)
        effects: list[SideEffect] = []
        pieces: list[str] = []
        clock = _clock
        last = clock()  # each hook's end is the next one's start: one clock read per hook
        for hook in self._start:
            started = last
            try:
                # should_trigger is called here, not in _begin: most hooks do not trigger, and
                # this path then costs one call instead of two.
                triggered = hook.should_trigger(ctx)
                if triggered is False:
                    last = clock()
                    if last - started > hook.timeout:
                        raise _overran(hook, last - started)
                    continue
                result = _begin(hook, ctx, triggered)
                if type(result) is _Pending:
                    result = await result.finish(started)
                last = clock()
                if last - started > hook.timeout:
                    raise _overran(hook, last - started)
            except Exception as exc:
                exc, last = _timed(hook, exc, started)
                name = hook.hook_name
                effects.append(SideEffect(name, f"hook {name} {_describe(exc)}", failure=True))
                if _lets_through(hook, exc):
                    continue
                return SessionStartOutcome(
                    ok=False,
                    additional_context=pieces,
                    error=f"The run could not start: the session hook '{name}' {_describe(exc)}.",
                    failed_by=name,
                    side_effects=effects,
                )
            if result is None:
                continue
            if result.side_effects:
                effects.extend(SideEffect(hook.hook_name, str(m)) for m in result.side_effects)
            if result.additional_context:
                pieces.append(result.additional_context)
        return SessionStartOutcome(ok=True, additional_context=pieces, side_effects=effects)
