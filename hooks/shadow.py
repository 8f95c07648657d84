"""Shadow mode: a declared hook that runs, and whose decision is recorded as what it *would* have
done, while the call goes on as if the hook were absent.

:class:`ShadowHook` wraps the hook a declaration in shadow mode builds (``hooks.catalog``'s
``registry_from_chain`` does it for a recorded chain item with ``"mode": "shadow"``). Contract:

* the wrapped hook sees a private copy of the context (arguments, result and facts deep-copied):
  nothing it does, returns or mutates reaches the arguments, the result, the need for approval or
  the approval gate; the wrapper always answers ``HookResult()`` (allow, nothing changed);
* its decision is judged as the registry would take it — ``block`` (``allow=False``), ``ask``
  (``require_confirmation``, or a suspension), ``rewrite`` (arguments or result changed),
  ``context`` (SessionStart text it would have added), ``fail_closed`` (it raised, answered
  something that is not a ``HookResult`` or ran past its timeout, with ``on_error="block"``) or
  ``fail_open`` (the same with ``on_error="allow"``) — and, unless it let the call through
  unchanged, reported as one trace note whose :attr:`~hooks.outcomes.SideEffect.shadow` says so;
* its failure never blocks: the wrapped hook's own timeout is applied here, and the wrapper's
  (a little longer) lets the call through if even that is passed (``on_error="allow"``).

Nothing here costs a chain without shadow hooks anything: the registry reads the wrapper's notes
only in the branch it takes when a hook reported notes.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from typing import Any

from hooks.contract import Hook, HookContext, HookPoint, HookResult, SuspendRun
from hooks.outcomes import SideEffect
from hooks.timeouts import clock

GRACE_SECONDS = 1.0
"""How much longer than the wrapped hook's timeout the registry gives the wrapper itself."""

VERBS = {
    "block": "would have blocked the call",
    "ask": "would have asked a person to approve the call",
    "rewrite": "would have rewritten",
    "context": "would have added context to the run",
    "fail_closed": "would have failed closed (blocked the call)",
    "fail_open": "would have failed, letting the call through",
}


def _private(ctx: HookContext) -> HookContext:
    """A copy of ``ctx`` the wrapped hook may change at will."""
    return HookContext(
        tool_name=ctx.tool_name,
        tool_args=copy.deepcopy(ctx.tool_args),
        agent_id=ctx.agent_id,
        user_id=ctx.user_id,
        metadata=copy.deepcopy(ctx.metadata),
        tool_result=copy.deepcopy(ctx.tool_result),
        hook_point=ctx.hook_point,
        requires_confirmation=ctx.requires_confirmation,
        confirmation_request_id=ctx.confirmation_request_id,
        tool_schema=ctx.tool_schema,
    )


def _failure(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout:g} s"
    text = str(exc)
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


class ShadowHook(Hook):
    """A declaration's hook in shadow mode (module docstring). ``declaration`` (its id, if any)
    and ``source`` (``agent``, ``organisation``, ``config``) say where it was declared."""

    def __init__(self, inner: Hook, *, declaration: int | None = None, source: str = "agent") -> None:
        self.inner = inner
        self.declaration = declaration
        self.source = source
        self.point = inner.point  # type: ignore[misc]
        self.name = inner.hook_name  # type: ignore[misc]
        self.priority = inner.priority
        self.band = inner.band
        self.timeout = inner.timeout + GRACE_SECONDS
        self.on_error = "allow"

    async def execute(self, ctx: HookContext) -> HookResult:
        decision, detail = await self.judge(ctx)
        if decision is None:
            return HookResult()
        note = SideEffect(
            self.hook_name,
            f"shadow: {VERBS[decision]}{': ' + detail if detail else ''}",
            shadow={"decision": decision, "declaration": self.declaration, "source": self.source},
        )
        return HookResult(side_effects=[note])  # type: ignore[list-item]  # the registry keeps it whole

    async def judge(self, ctx: HookContext) -> tuple[str | None, str]:
        """What the wrapped hook would have done with ``ctx``: ``(decision, detail)``, ``decision``
        ``None`` when it would have let the call through unchanged (or did not apply)."""
        inner = self.inner
        mine = _private(ctx)
        started = clock()
        try:
            async with asyncio.timeout(inner.timeout):
                triggered = inner.should_trigger(mine)
                if inspect.isawaitable(triggered):
                    triggered = await triggered
                if not triggered:
                    return None, ""
                result = await inner.execute(mine)
            if clock() - started > inner.timeout:  # it blocked the loop past its timeout
                raise TimeoutError
            if not isinstance(result, HookResult):
                raise TypeError(f"returned {type(result).__name__} instead of HookResult")
        except SuspendRun as suspension:
            if self.point is HookPoint.PRE_TOOL_USE:
                return "ask", suspension.reason
            return self._failed(suspension, inner)
        except Exception as exc:  # TimeoutError included
            return self._failed(exc, inner)
        return self._decision(result, ctx)

    def _failed(self, exc: BaseException, inner: Hook) -> tuple[str, str]:
        closed = inner.on_error != "allow"
        return ("fail_closed" if closed else "fail_open"), _failure(exc, inner.timeout)

    def _decision(self, result: HookResult, ctx: HookContext) -> tuple[str | None, str]:
        point = self.point
        if point is HookPoint.PRE_TOOL_USE:
            if not result.allow:
                return "block", result.error or f"blocked by '{self.hook_name}'"
            if result.require_confirmation is True:
                return "ask", result.confirmation_reason or "the call meets its conditions"
            if result.modified_args is not None and result.modified_args != ctx.tool_args:
                changed = sorted(
                    str(key)
                    for key in set(result.modified_args) | set(ctx.tool_args)
                    if result.modified_args.get(key, _ABSENT) != ctx.tool_args.get(key, _ABSENT)
                )
                return "rewrite", f"the arguments ({', '.join(changed)})"
            return None, ""
        if point is HookPoint.POST_TOOL_USE:
            if result.modified_result is not None and result.modified_result != ctx.tool_result:
                return "rewrite", "the result the model reads"
            return None, ""
        if result.additional_context:
            return "context", f"{len(result.additional_context)} characters"
        return None, ""


_ABSENT: Any = object()
