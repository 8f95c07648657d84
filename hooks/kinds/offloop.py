"""Hook code run off the event loop, in a bounded pool of hook threads (docs/design.md §1.1).

A declared python hook is an operator's own code, and it may block: ``time.sleep``, a synchronous
HTTP client, a busy loop. On the server's event loop that would stall every run of the process, and
its timeout could not fire until it returned. So each call of a python hook runs in a hook thread —
a plain function as is, a coroutine on that thread's own event loop — while the run awaits it under
the hook's timeout like any hook that suspends: at the timeout the call fails closed at once, and
the loop never waits for the hook.

Threads, not processes: a python hook keeps what it is promised in-process — the same settings,
database configuration and module state, its own instance between calls, results of any Python
type — for the cost of a thread hop (tens of µs; a process would add serialisation and a process's
memory per worker). The price is that a thread cannot be killed. A call that outlives its timeout
is *written off*: its caller has already failed closed, its answer will be ignored, a coroutine is
cancelled, and a plain function runs on until it returns. A hook that must be killable is declared
as a ``command`` hook (its process group is killed at the timeout).

Bounds, so that runaways cannot exhaust the pool:

- at most ``HOOK_PYTHON_THREADS`` threads take calls (started on demand; default 32). A thread
  whose call was written off stops counting, and a replacement may start;
- at most ``HOOK_PYTHON_RUNAWAYS`` written-off threads are replaced (default 32): past that, the
  pool shrinks, and calls that find no thread wait and fail closed at their timeout;
- at most ``HOOK_PYTHON_RUNAWAYS_PER_HOOK`` calls of one hook (by dotted path) may run past their
  timeout (default 4): further calls of that hook fail closed at once, without taking a thread,
  until one returns. One broken hook cannot starve the others.

A written-off thread that returns rejoins the pool (or ends, if a replacement took its place).

The hook works on its own deep copy of the call's arguments, metadata and result, made in its
thread: a call written off at its timeout can never change what the run goes on with. What a hook
wants changed it says in its :class:`~hooks.contract.HookResult`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import copy
import dataclasses
import inspect
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from hooks.contract import HookContext
from hooks.outcomes import HookTimeout

logger = logging.getLogger(__name__)

# A call's states, moved under the pool's lock.
_QUEUED, _RUNNING, _WRITTEN_OFF, _DONE, _DROPPED = range(5)


class HookNotStarted(HookTimeout):
    """A call was refused at once: too many earlier calls of the same hook still run past their
    timeout. It fails closed as a timeout does."""


class _Call:
    __slots__ = ("caller", "context", "ctx", "func", "future", "key", "loop", "state", "task")

    def __init__(self, func: Callable[[HookContext], Any], ctx: HookContext, key: str) -> None:
        self.func, self.ctx, self.key = func, ctx, key
        self.caller = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = self.caller.create_future()
        # The caller's context variables follow the call, as ``asyncio.to_thread`` does.
        self.context = contextvars.copy_context()
        self.state = _QUEUED
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None


def _own_copy(ctx: HookContext) -> HookContext:
    return dataclasses.replace(
        ctx,
        tool_args=copy.deepcopy(ctx.tool_args),
        metadata=copy.deepcopy(ctx.metadata),
        tool_result=copy.deepcopy(ctx.tool_result),
    )


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _deliver(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not future.done():
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class HookThreads:
    """The pool (see the module's docstring). Safe to share between event loops and threads."""

    def __init__(self, *, size: int, runaways: int, runaways_per_hook: int) -> None:
        if size < 1 or runaways < 0 or runaways_per_hook < 1:
            raise ValueError("a hook thread pool needs a thread, and allows at least one runaway per hook")
        self.size = size
        self.max_runaways = runaways
        self.runaways_per_hook = runaways_per_hook
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[_Call] = collections.deque()
        self._threads = 0
        self._idle = 0  # threads waiting for a call that no submission has claimed yet
        self._runaways = 0
        self._runaways_of: collections.Counter[str] = collections.Counter()
        self._closing = False
        self._alive: set[threading.Thread] = set()

    def stats(self) -> dict[str, int]:
        """Threads alive, waiting for a call, and written off (for tests and operators)."""
        with self._cond:
            return {"threads": self._threads, "idle": self._idle, "runaways": self._runaways}

    def shutdown(self, *, wait: float = 0.0) -> bool:
        """Refuse new calls and end the threads once the calls they run return; wait up to
        ``wait`` seconds for them. Whether every thread has ended."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            threads = list(self._alive)
        deadline = time.monotonic() + wait
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)

    async def run(self, func: Callable[[HookContext], Any], ctx: HookContext, *, key: str) -> Any:
        """``func(ctx)`` in a hook thread (awaited there if it returns an awaitable), given a deep
        copy of ``ctx``. Returns its value or raises what it raised; raises
        :class:`HookNotStarted` when ``key`` (the hook's identity) has too many calls written off.

        Cancelling the awaiting task (the registry does at the hook's timeout) writes the call
        off at once: nothing here ever waits for the hook."""
        call = _Call(func, ctx, key)
        self._submit(call)
        try:
            return await call.future
        except BaseException:
            self._write_off(call)
            raise

    def _submit(self, call: _Call) -> None:
        with self._cond:
            if self._closing:
                raise RuntimeError("the hook threads are shut down")
            stuck = self._runaways_of[call.key]
            if stuck >= self.runaways_per_hook:
                raise HookNotStarted(
                    f"was not started: {stuck} of its calls are still running past their timeout"
                )
            self._queue.append(call)
            if self._idle:
                self._idle -= 1
                self._cond.notify()
            else:
                self._grow()

    def _grow(self) -> None:
        """Start a thread if a call waits and the bounds allow it (the lock is held)."""
        if (
            self._queue
            and not self._idle
            and self._threads - self._runaways < self.size
            and self._threads < self.size + self.max_runaways
        ):
            self._threads += 1
            thread = threading.Thread(target=self._work, name=f"hook-thread-{self._threads}", daemon=True)
            self._alive.add(thread)
            thread.start()

    def _write_off(self, call: _Call) -> None:
        with self._cond:
            if call.state == _QUEUED:
                call.state = _DROPPED
                with contextlib.suppress(ValueError):
                    self._queue.remove(call)
                return
            if call.state != _RUNNING:
                return
            call.state = _WRITTEN_OFF
            self._runaways += 1
            self._runaways_of[call.key] += 1
            if call.task is not None and call.loop is not None:
                with contextlib.suppress(RuntimeError):
                    call.loop.call_soon_threadsafe(call.task.cancel)
            self._grow()
            count = self._runaways
        logger.warning(
            "python hook %s still runs although its call was given up (timed out, or the run was "
            "cancelled): its thread is written off until it returns (%d written off)",
            call.key,
            count,
        )

    def _work(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            while True:
                with self._cond:
                    while not self._queue:
                        if self._closing:
                            self._threads -= 1
                            return
                        self._idle += 1
                        self._cond.wait()  # whoever notifies has counted this thread out of the idle
                    call = self._queue.popleft()
                    call.state = _RUNNING
                ok, value = self._call(call, loop)
                with self._cond:
                    written_off = call.state == _WRITTEN_OFF
                    call.state = _DONE
                    if written_off:
                        self._runaways -= 1
                        self._runaways_of[call.key] -= 1
                        if not self._runaways_of[call.key]:
                            del self._runaways_of[call.key]
                    leave = self._threads - self._runaways > self.size  # replaced meanwhile
                    if leave:
                        self._threads -= 1
                if written_off:
                    logger.info("python hook %s returned after it was written off", call.key)
                else:
                    with contextlib.suppress(RuntimeError):  # the caller's loop is closed
                        call.caller.call_soon_threadsafe(_deliver, call.future, ok, value)
                call = value = None  # type: ignore[assignment]  # hold nothing while idle
                if leave:
                    return
        finally:
            with contextlib.suppress(Exception):
                loop.close()
            with self._cond:
                self._alive.discard(threading.current_thread())

    def _call(self, call: _Call, loop: asyncio.AbstractEventLoop) -> tuple[bool, Any]:
        try:
            value = call.context.run(call.func, _own_copy(call.ctx))
            if inspect.isawaitable(value):
                coro = value if inspect.iscoroutine(value) else _awaited(value)
                task = loop.create_task(coro, context=call.context)
                with self._cond:
                    call.loop, call.task = loop, task
                    if call.state == _WRITTEN_OFF:
                        task.cancel()
                value = loop.run_until_complete(task)
            return True, value
        except StopIteration:  # a future refuses it
            return False, RuntimeError("StopIteration in the hook")
        except Exception as exc:
            return False, exc
        except BaseException as exc:  # cancelled, or SystemExit from the hook: a failure all the same
            return False, RuntimeError(f"{type(exc).__name__} in the hook")
        finally:
            # A hook thread lives long and a hook may use the ORM: close its stale connections
            # after each call, as Django does after a request. Never a reason to lose the thread.
            try:
                close_old_connections()
            except Exception:
                logger.exception("a hook thread could not close its database connections")


_pool: HookThreads | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    # A forked child (a prefork worker) has none of its parent's threads: it builds its own pool.
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def hook_threads() -> HookThreads:
    """The process's pool, built on first use from the settings."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = HookThreads(
                    size=settings.HOOK_PYTHON_THREADS,
                    runaways=settings.HOOK_PYTHON_RUNAWAYS,
                    runaways_per_hook=settings.HOOK_PYTHON_RUNAWAYS_PER_HOOK,
                )
    return _pool
