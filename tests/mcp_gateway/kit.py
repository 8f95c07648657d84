"""The MCP gateway served over real HTTP for the tests, and the official SDK's client pointed at it
as Claude Code or Cursor would be."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from django.db import connection
from rest_framework.authtoken.models import Token

from agents.models import Agent
from fimone import adb
from mcp_gateway.models import Gateway
from tests.agents.mcp_kit import free_port


@contextlib.contextmanager
def served_gateway() -> Iterator[str]:
    """The gateway app on a free port, in a thread of its own (its own event loop): the base URL."""
    import uvicorn

    from mcp_gateway.server import GatewayApp

    port = free_port()
    app = _ClosingItsPool(GatewayApp())
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the gateway did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


class _ClosingItsPool:
    """The gateway app, and when its server stops, the pool of connections its loop opened
    (``fimone.adb``: a deployed server's loop lives as long as its process; a test's does not)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await adb.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def token_of(user: Any) -> str:
    return Token.objects.get_or_create(user=user)[0].key


def make_gateway(agent: Agent, **fields: Any) -> Gateway:
    fields.setdefault("name", "Desk")
    return Gateway.objects.create(organization_id=agent.organization_id, agent=agent, **fields)


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str | None) -> AsyncIterator[Any]:
    """The official SDK's client, connected to ``url`` with ``token`` as a Bearer token."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
    async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
        yield client


def run_async(coro: Any) -> Any:
    """Run a client's coroutine from a synchronous test, on a loop of its own."""
    return asyncio.run(coro)


class Waiting:
    """A client's call made in a thread of its own (it waits for a person), with what it heard."""

    def __init__(self, url: str, token: str, tool: str, args: dict[str, Any]) -> None:
        self.progress: list[str] = []
        self.result: Any = None
        self.error: BaseException | None = None

        async def call() -> Any:
            async def heard(progress: float, total: float | None, message: str | None) -> None:
                self.progress.append(message or "")

            async with mcp_client(url, token) as client:
                return await client.call_tool(tool, args, progress_callback=heard)

        def run() -> None:
            try:
                self.result = run_async(call())
            except BaseException as exc:  # reported to the test
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 60) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the client is still waiting"
        if self.error is not None:
            raise self.error
        return self.result


def until(check, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


HOLD_SECONDS = 30.0  # a bound on holding a start, never a measured delay


class HeldAfterLookup:
    """Two identical calls at the same moment, made deterministic: the first start to reach the
    run-start budget's take (which both paths make after their retry lookup and before writing
    the call) is held there until :meth:`let_go`; later starts pass. ``services`` is
    ``mcp_gateway.services``, whose names are patched through ``monkeypatch``."""

    def __init__(self, monkeypatch: Any, services: Any) -> None:
        self.arrivals = 0
        self.first_arrived = threading.Event()
        self.released = threading.Event()
        self._count = threading.Lock()
        take, take_async = services.run_starts_take, services.run_starts_take_async

        def held_take(*, user: Any) -> Any:
            if self._arrive():
                self.released.wait(HOLD_SECONDS)
            return take(user=user)

        async def held_take_async(*, user: Any) -> Any:
            if self._arrive():
                await asyncio.to_thread(self.released.wait, HOLD_SECONDS)
            return await take_async(user=user)

        monkeypatch.setattr(services, "run_starts_take", held_take)
        monkeypatch.setattr(services, "run_starts_take_async", held_take_async)

    def _arrive(self) -> bool:
        with self._count:
            self.arrivals += 1
            first = self.arrivals == 1
        if first:
            self.first_arrived.set()
        return first

    def let_go(self, waits_on_a_lock: Any) -> None:
        """Release the first start once the second one got as far as it may while the first has
        written nothing: past its own retry lookup (at the take), or waiting on a lock
        (``waits_on_a_lock()``)."""
        assert self.first_arrived.wait(HOLD_SECONDS), "no start reached the take"
        deadline = time.monotonic() + HOLD_SECONDS
        while self.arrivals < 2 and not waits_on_a_lock() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.released.set()

    def let_go_in_thread(self, waits_on_a_lock: Any) -> threading.Thread:
        """:meth:`let_go` in a thread of its own (with its own connection), for a test that makes
        the calls after this."""

        def let_go() -> None:
            try:
                self.let_go(waits_on_a_lock)
            finally:
                connection.close()

        thread = threading.Thread(target=let_go, daemon=True)
        thread.start()
        return thread
