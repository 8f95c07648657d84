"""Where runs execute: Celery workers (production) or the server process (embedded).

The engine code is the same in both; only the place that awaits it differs. Callers enqueue with
``transaction.on_commit`` so a worker never looks for a row that is not committed yet.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from django.conf import settings

from agents.tools.mcp_tools import keep_sessions_on

log = logging.getLogger(__name__)


class EmbeddedExecutor:
    """Runs engine coroutines as tasks on the server's event loop when one is bound (Daphne binds
    it on its first request, see ``fimone.asgi``), else on a private loop in a daemon thread.

    Runs are asyncio tasks: they do not block one another or the server while they wait on the
    LLM, tools or hooks. Each task starts with an empty context so it is not tied to the request
    that created it.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._own_loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._futures: set[concurrent.futures.Future[Any]] = set()

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        keep_sessions_on(loop)

    def owns_running_loop(self) -> bool:
        """Whether the running loop lives as long as the process (the server's, bound here, or
        this executor's own), rather than being made for one task."""
        loop = asyncio.get_running_loop()
        return loop is self._loop or loop is self._own_loop

    def _target_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is not None and not self._loop.is_closed():
            return self._loop
        with self._lock:
            if self._own_loop is None or self._own_loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="fimone-embedded-runs", daemon=True).start()
                keep_sessions_on(loop)
                self._own_loop = loop
            return self._own_loop

    def submit(self, factory: Callable[[], Coroutine[Any, Any, Any]]) -> concurrent.futures.Future[Any]:
        loop = self._target_loop()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def start() -> None:
            task = loop.create_task(_logged(factory()), context=contextvars.Context())

            def done(t: asyncio.Task[Any]) -> None:
                if t.cancelled():
                    future.cancel()
                elif t.exception() is not None:
                    future.set_exception(t.exception())  # type: ignore[arg-type]
                else:
                    future.set_result(t.result())

            task.add_done_callback(done)

        self._futures.add(future)
        future.add_done_callback(self._futures.discard)
        loop.call_soon_threadsafe(start)
        return future

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Block until every submitted run finished (tests and graceful shutdown)."""
        _done, pending = concurrent.futures.wait(list(self._futures), timeout=timeout)
        if pending:
            raise TimeoutError(f"{len(pending)} embedded run(s) still running after {timeout} s")


async def _logged(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coro
    except Exception:
        log.exception("an embedded run task crashed")
        raise


embedded = EmbeddedExecutor()

# The code that drives runs sits above this module (``agents.engine.runner`` imports the engines,
# ``agents.tasks`` the runner and the services), and callers all over the apps dispatch through
# this one: the upper modules install their entry points here when they are imported
# (``AgentsConfig.ready`` imports both), so nothing below them imports upwards.
RunStarter = Callable[[int], Coroutine[Any, Any, Any]]
RunResumer = Callable[..., Coroutine[Any, Any, Any]]
_drive: dict[str, Callable[..., Any]] = {}
_enqueue: dict[str, Callable[..., Any]] = {}


def install_driver(*, execute: RunStarter, resume: RunResumer) -> None:
    """The coroutines that drive a run in this process (installed by ``agents.engine.runner``)."""
    _drive.update(execute=execute, resume=resume)


def install_queue(*, execute: Callable[[int], Any], resume: Callable[[int, str], Any]) -> None:
    """The senders that hand a run to a Celery worker (installed by ``agents.tasks``)."""
    _enqueue.update(execute=execute, resume=resume)


def _installed(table: dict[str, Callable[..., Any]], what: str) -> Callable[..., Any]:
    try:
        return table[what]
    except KeyError:
        raise RuntimeError(
            f"no run {what} installed: agents.engine.runner and agents.tasks install theirs when "
            "imported (AgentsConfig.ready imports them)"
        ) from None


def dispatch_execute(run_id: int) -> None:
    """Hand a queued run to the executor. Call after the run's row is committed."""
    if settings.RUN_EXECUTOR == "celery":
        _installed(_enqueue, "execute")(run_id)
        return
    execute = _installed(_drive, "execute")
    embedded.submit(lambda: execute(run_id))


def dispatch_resume(run_id: int, *, reason: str) -> None:
    """Hand a suspended (or orphaned) run to the executor to continue."""
    if settings.RUN_EXECUTOR == "celery":
        _installed(_enqueue, "resume")(run_id, reason)
        return
    resume = _installed(_drive, "resume")
    embedded.submit(lambda: resume(run_id, reason=reason))
