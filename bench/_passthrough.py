"""The floor under the MCP gateway's cost: an MCP server that forwards every ``tools/call`` to
another MCP server, and does nothing else (no token, no run, no database, no hooks).

It is served as the gateway is (Daphne, the official SDK's low-level ``Server`` behind its
stateless Streamable HTTP session manager) and forwards through the SDK's client in one session
kept open, as the gateway's connector does. What it adds to a direct call is what receiving an
MCP call and making one costs in this stack, before the platform does any work of its own.

    UPSTREAM=http://127.0.0.1:PORT/mcp daphne --bind 127.0.0.1 --port PORT2 _passthrough:app
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import ListToolsResult


class Passthrough:
    """ASGI app: one session manager and one upstream client, both opened on the first request
    and kept for the loop's life."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.ready: asyncio.Task[tuple[Any, Any]] | None = None

    async def _open(self) -> tuple[Any, Any]:
        opened: asyncio.Future[tuple[Any, Any]] = asyncio.get_running_loop().create_future()

        async def list_tools(ctx: Any, params: Any) -> Any:
            return ListToolsResult(tools=(await client.list_tools()).tools)

        async def call_tool(ctx: Any, params: Any) -> Any:
            return await client.call_tool(params.name, params.arguments or {})

        # As the gateway does: the SDK would otherwise list the tools again before every call.
        server = Server(
            "passthrough",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            get_tool_input_schema=lambda name: None,
        )
        manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=False)
        http = httpx2.AsyncClient(timeout=httpx2.Timeout(30))
        client = Client(streamable_http_client(self.upstream, http_client=http), cache=None)

        async def hold() -> None:
            async with client, manager.run():
                opened.set_result((manager, client))
                await asyncio.Event().wait()

        asyncio.get_running_loop().create_task(hold(), context=contextvars.Context())
        return await opened

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if self.ready is None:
            self.ready = asyncio.get_running_loop().create_task(self._open())
        manager, _client = await self.ready
        await manager.handle_request(scope, receive, send)


app = Passthrough(os.environ.get("UPSTREAM", "http://127.0.0.1:8000/mcp"))
