"""How one hook call is held to its timeout (docs/design.md §1.1), at the least cost per call.

Most hooks finish without ever suspending (a dict lookup, a regex). Wrapping each call in
``asyncio.timeout`` would arm and cancel an event-loop timer per hook per tool call. Instead the
registry takes a hook's first step itself, by iterating :func:`stepped`: a hook that returns ends
the iteration and no timer was armed; only a hook that suspends is finished by :func:`finish` under
``asyncio.timeout``, armed with what is left of its timeout.

A hook that blocks the thread without suspending cannot be interrupted by any asyncio timeout, so
the registry also reads :func:`clock` around every hook, ``should_trigger`` included: a hook whose
wall time passed its timeout has timed out even if it returned (:func:`overran`, :func:`timed`).
"""

from __future__ import annotations

import asyncio
import inspect
import time
import types
from collections.abc import Awaitable, Generator
from typing import Any

from hooks.outcomes import HookTimeout

clock = time.perf_counter
"""The registry's clock: monotonic, and read once per hook (each hook's end is the next one's
start)."""


@types.coroutine
def stepped(awaitable: Awaitable[Any], box: list[Any]) -> Generator[Any, Any, None]:
    """Drive ``awaitable`` exactly as ``await`` would, and put what it returns into ``box[0]``.

    Iterating this generator runs the awaitable until it first suspends (the ``for`` body then
    gets what it yields: finish it with :func:`finish`) or returns (the ``for`` loop just ends).
    Returning ``None`` matters: a generator that returns ``None`` ends a ``for`` loop without
    creating a ``StopIteration``, the costliest part of stepping a coroutine by hand with ``send``.
    """
    box[0] = yield from awaitable


@types.coroutine
def _resume(steps: Generator[Any, Any, None], pending: Any) -> Generator[Any, Any, None]:
    """Finish driving ``steps`` (suspended at ``pending``) exactly as ``await`` would."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            steps.close()
            raise
        except BaseException as exc:  # cancellation included: forward it into the hook
            try:
                pending = steps.throw(exc)
            except StopIteration:
                return
        else:
            try:
                pending = steps.send(sent)
            except StopIteration:
                return


async def finish(steps: Generator[Any, Any, None], pending: Any, budget: float, timeout: float) -> None:
    """Finish a :func:`stepped` hook call that suspended at ``pending`` within ``budget``, what is
    left of its ``timeout``, or raise :class:`HookTimeout`; its answer lands in its box."""
    if budget <= 0:
        steps.close()
        raise HookTimeout(f"timed out after {timeout:g} s")
    try:
        async with asyncio.timeout(budget) as scope:
            await _resume(steps, pending)
    except TimeoutError:
        if scope.expired():
            raise HookTimeout(f"timed out after {timeout:g} s") from None
        raise


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


async def triggers(answer: Any, started: float, timeout: float) -> bool:
    """Whether a hook whose ``should_trigger`` answered something other than a bool triggers: an
    awaitable (an ``async def should_trigger``) is awaited within what is left of ``timeout`` since
    ``started``; then the answer's truth decides."""
    if inspect.isawaitable(answer):
        box: list[Any] = [None]
        steps = stepped(answer if inspect.iscoroutine(answer) else _await(answer), box)
        for pending in steps:
            await finish(steps, pending, timeout - (clock() - started), timeout)
            break
        answer = box[0]
    return bool(answer)


def overran(timeout: float, elapsed: float) -> HookTimeout:
    """What a hook that answered after its timeout failed with: it timed out (docs/design.md §1.1)."""
    return HookTimeout(f"timed out after {timeout:g} s (it ran for {elapsed:.2f} s; its answer is ignored)")


def timed(timeout: float, exc: Exception, started: float) -> tuple[Exception, float]:
    """The failure to report for a hook that failed, and the clock: a hook that failed after its
    timeout timed out, whatever it raised."""
    now = clock()
    elapsed = now - started
    if elapsed > timeout and not isinstance(exc, HookTimeout):
        return overran(timeout, elapsed), now
    return exc, now
