"""How a hook's answer folds into its point's outcome: what differs from point to point.

:mod:`hooks.registry` runs every chain, and the observers of a blocked call, with one loop (its
``_chain``), which owns everything the points share: the clock and the timeouts, ``should_trigger``,
a system hook's events, the failure note, ``on_error``, the notes a hook returns and telemetry.
What is left differs by point and is a :class:`Fold` here, one per call, holding that call's state;
each says what a hook's answer does, and what a failure that does not let the call through does:

- :class:`PreFold` (PreToolUse): ``allow=False`` blocks the call (the chain stops); an answer may
  ask for approval, name the approved arguments (a system hook's), rewrite the arguments; a
  failure blocks the call.
- :class:`PostFold` (PostToolUse): an answer may rewrite the result; a failure withholds it (an
  error notice in its place) and the chain goes on.
- :class:`StartFold` (SessionStart): an answer may add context; a failure stops the run's start.
- :class:`ObserverFold` (the observers of a blocked call): an answer is nothing; a failure is
  noted and changes nothing.

Only :class:`PreFold` lets a hook suspend the run (``suspends``) and keeps a floor under the
context's need for approval (``needed``). A fold sees a failure only after the loop noted it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

from hooks.contract import Hook, HookContext, HookPoint, HookResult, SuspendRun
from hooks.outcomes import HookTimeout, SideEffect
from hooks.timeouts import clock

_KEEP: Any = object()


def evolve(
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


# evolve() must copy every field: fail at import if HookContext grows one it does not know.
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
), "update hooks.folds.evolve for the new HookContext field"


def shadow_decision(result: HookResult) -> str | None:
    """What a hook in shadow mode would have done, from its note (``hooks.shadow``), if anything."""
    for note in result.side_effects:
        if type(note) is SideEffect and note.shadow is not None:
            return f"shadow_{note.shadow['decision']}"
    return None


class Fold:
    """One call's chain state, and how its point folds a hook's answer into it.

    The loop calls :meth:`take` with each answer that passed (a ``HookResult``, in time, its notes
    already recorded) and :meth:`failed` with each failure that does not let the call through
    (its note already recorded); both answer the context the next hook sees, or ``None`` to stop
    the chain, the fold then holding why. :meth:`decision` names an answer for telemetry, and is
    called only when it is on and ``traced``.
    """

    __slots__ = ("effects",)

    point: ClassVar[HookPoint]
    traced: ClassVar[bool] = True
    suspends: ClassVar[bool] = False
    """Whether a hook may suspend the run (``SuspendRun``): then :attr:`suspension` is set and the
    chain stops; anywhere else a suspension is a failure."""
    needed: bool | None = None
    """A floor under ``ctx.requires_confirmation``: the loop hands each hook a context carrying
    exactly this (copied when it differs); ``None``: left as the caller set it."""
    call: Callable[[Hook, HookContext, float, float], Coroutine[Any, Any, HookResult]] | None = None
    """How the loop calls a hook: ``None``, ``hook.execute(ctx)``; else ``call(hook, ctx, started,
    timeout)``, ``started`` the clock reading its timeout runs from."""
    suspension: SuspendRun | None

    def __init__(self) -> None:
        # The folds below set their slots themselves, without calling this: a call less per chain.
        self.effects: list[SideEffect] = []

    def take(self, result: HookResult, name: str, system: bool, ctx: HookContext) -> HookContext | None:
        """Fold the answer of hook ``name`` (``system``: a system hook) in; by default it changes
        nothing."""
        return ctx

    def failed(self, name: str, why: str, ctx: HookContext) -> HookContext | None:
        """Fold in that hook ``name`` failed and may not fail open; ``why``: the failure as its note
        tells it (``raised …``, ``timed out …``). By default it stops the chain."""
        return None

    def decision(self, result: HookResult) -> str:
        return (result.side_effects and shadow_decision(result)) or "allow"

    def failure(self, exc: Exception, timeout: float) -> Exception:
        """The failure a hook's exception is reported as: itself, but for observers."""
        return exc


class PreFold(Fold):
    """PreToolUse: the first ``allow=False`` or failure blocks the call (``blocked_by``,
    ``error``); a hook may suspend the run; the need for approval only grows (``asked`` names who
    asked); a system hook's answer names the approved arguments and request; rewritten arguments
    flow on."""

    __slots__ = ("approved", "asked", "blocked_by", "error", "needed", "request_id", "suspension")

    point = HookPoint.PRE_TOOL_USE
    suspends = True

    def __init__(self, needed: bool) -> None:
        self.effects = []
        self.needed = needed
        self.asked: list[str] = []
        self.approved: str | None = None
        self.request_id: str | None = None
        self.suspension = None
        self.blocked_by: str | None = None
        self.error = ""  # why the call was blocked, once it was

    def take(self, result: HookResult, name: str, system: bool, ctx: HookContext) -> HookContext | None:
        if not result.allow:
            self.blocked_by, self.error = name, result.error or f"Tool call blocked by '{name}'."
            return None
        if result.require_confirmation is True:
            self.needed = True
            self.asked.append(name)
            reason = result.confirmation_reason or "the call meets its conditions"
            self.effects.append(SideEffect(name, f"asked for human approval: {reason}"))
        if system:  # what the gate tells the engine counts from system hooks only
            if result.approved_args_sha256 is not None:
                self.approved = str(result.approved_args_sha256)
            if result.confirmation_request_id is not None:
                self.request_id = str(result.confirmation_request_id)
        if result.modified_args is not None:
            return evolve(ctx, tool_args=result.modified_args)
        return ctx

    def failed(self, name: str, why: str, ctx: HookContext) -> None:
        self.blocked_by = name
        self.error = f"Tool call blocked: the safety check '{name}' could not complete."

    def decision(self, result: HookResult) -> str:
        if result.side_effects and (shadow := shadow_decision(result)):
            return shadow
        if not result.allow:
            return "block"
        if result.require_confirmation is True:
            return "ask"
        return "rewrite" if result.modified_args is not None else "allow"


class PostFold(Fold):
    """PostToolUse: ``modified_result`` chains; a failure replaces the observation with an error
    notice (later hooks see the notice) and is named in ``failed_hooks``; the chain never stops."""

    __slots__ = ("failed_hooks",)

    point = HookPoint.POST_TOOL_USE

    def __init__(self) -> None:
        self.effects = []
        self.failed_hooks: list[str] = []

    def take(self, result: HookResult, name: str, system: bool, ctx: HookContext) -> HookContext:
        if result.modified_result is not None:
            return evolve(ctx, tool_result=result.modified_result)
        return ctx

    def failed(self, name: str, why: str, ctx: HookContext) -> HookContext:
        self.failed_hooks.append(name)
        notice = f"[The tool's result was withheld: the post-processing check '{name}' could not complete.]"
        return evolve(ctx, tool_result=notice)

    def decision(self, result: HookResult) -> str:
        if result.modified_result is not None:
            return "rewrite"
        return (result.side_effects and shadow_decision(result)) or "allow"


class StartFold(Fold):
    """SessionStart: ``additional_context`` collected in order; a failure stops the run's start
    (``failed_by``, ``error``)."""

    __slots__ = ("error", "failed_by", "pieces")

    point = HookPoint.SESSION_START

    def __init__(self) -> None:
        self.effects = []
        self.pieces: list[str] = []
        self.failed_by: str | None = None
        self.error: str | None = None

    def take(self, result: HookResult, name: str, system: bool, ctx: HookContext) -> HookContext:
        if result.additional_context:
            self.pieces.append(result.additional_context)
        return ctx

    def failed(self, name: str, why: str, ctx: HookContext) -> None:
        self.failed_by = name
        self.error = f"The run could not start: the session hook '{name}' {why}."


_NOTHING = HookResult()  # what an observer's call answers: nothing to fold


class ObserverFold(Fold):
    """The observers of a call ``blocked_by`` a hook (an audit log): each is told through its
    ``on_blocked`` and answers nothing; its failure is noted and changes nothing. Not traced. An
    observer whose ``should_trigger`` used up its whole timeout is not started, and any
    ``TimeoutError`` it raises (its own included) is reported as its timeout."""

    __slots__ = ("blocked_by", "error")

    point = HookPoint.PRE_TOOL_USE  # they observe a PreToolUse call (never read: not traced)
    traced = False

    def __init__(self, effects: list[SideEffect], blocked_by: str, error: str) -> None:
        self.effects = effects
        self.blocked_by = blocked_by
        self.error = error

    async def call(self, hook: Hook, ctx: HookContext, started: float, timeout: float) -> HookResult:
        """Tell ``hook`` of the block, unless its ``should_trigger`` already used up its timeout."""
        if timeout - (clock() - started) <= 0:
            raise HookTimeout(f"timed out after {timeout:g} s")
        await hook.on_blocked(ctx, blocked_by=self.blocked_by, error=self.error)
        return _NOTHING

    def failed(self, name: str, why: str, ctx: HookContext) -> HookContext:
        return ctx  # the next observer is told all the same

    def failure(self, exc: Exception, timeout: float) -> Exception:
        if isinstance(exc, TimeoutError):
            return HookTimeout(f"timed out after {timeout:g} s")
        return exc
