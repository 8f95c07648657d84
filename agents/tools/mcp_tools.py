"""MCP connectors' tools: each tool an MCP server lists is a tool of its connector, called through
the official ``mcp`` SDK client over Streamable HTTP or stdio.

Contract of :meth:`McpTool.run`:

* The server is reached as the connector says (:class:`McpServer`): over Streamable HTTP at its
  URL, with the connector's secret headers, through the egress guard (:mod:`fimone.egress`); or
  over stdio, its ``command`` run as an argv without a shell, with a minimal environment plus the
  connector's secret ``env``, in ``settings.HOOK_COMMAND_CWD``.
* A server that cannot be reached, or whose handshake fails, raises :class:`ToolError`: nothing
  was called.
* Once the ``tools/call`` request is sent, the outcome belongs to the server: a result marked
  ``isError`` raises :class:`ToolError` with the server's text; a JSON-RPC error answer (unknown
  tool, bad arguments) raises :class:`ToolError` too (the server refused the call). A server that
  disconnects before answering, or a call that outlives the connector's timeout, raises
  :class:`OutcomeUnknown`: the call may have taken effect, and it is never sent again. At the
  timeout, and when the run stops waiting (cancellation), the SDK tells the server to cancel
  (``notifications/cancelled``).
* A successful result is its ``structuredContent`` when the server gave one, else its content
  blocks as text (images and other binary blocks are named, not inlined).
* No credential reaches the observation: the secret header and environment values are masked
  (:mod:`agents.tools.redaction`).

Sessions: on an event loop that lives as long as the process (the server's, a worker's: those
call :func:`keep_sessions_on`), a connector's session stays open between calls (a stdio server
keeps running) and is closed after :data:`IDLE_SECONDS` without a call; a session idle for more
than :data:`PING_AFTER_SECONDS` is pinged before a call goes out on it, and opened anew if the
server went away meanwhile, so a call that never left is never reported as of unknown outcome.
Elsewhere (a loop made for one task) each call opens and closes its own session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
import warnings
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from agents.tools.base import OutcomeUnknown, Tool, ToolError, ToolSpec
from agents.tools.redaction import redact_credentials
from agents.tools.schema import EMPTY_OBJECT_SCHEMA
from fimone import egress
from hooks.kinds.base import CLAUDE_MCP_PREFIX, MCP_ALIAS

log = logging.getLogger(__name__)

CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
MAX_TEXT_CHARS = 20_000
STDERR_EXCERPT = 400
#: What a stdio server's process inherits besides the connector's own ``env``: no secret of ours.
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
CLIENT_NAME = "fimone-hooks"
IDLE_SECONDS = 60.0
PING_AFTER_SECONDS = 5.0


@dataclass(frozen=True)
class RemoteTool:
    """A tool as an MCP server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any]
    title: str = ""


@dataclass(frozen=True)
class McpServer:
    """How to reach one connector's MCP server, copied from the connector so that calls touch no
    database and can run in any event loop."""

    label: str
    transport: str  # "http" | "stdio"
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 15.0

    @classmethod
    def of(cls, connector: Any) -> McpServer:
        secrets = connector.secrets if isinstance(connector.secrets, dict) else {}
        return cls(
            label=connector.slug,
            transport=connector.mcp_transport,
            url=connector.base_url or "",
            headers=_text_map(secrets.get("headers")),
            argv=tuple(connector.command or ()),
            env=_text_map(secrets.get("env")),
            timeout=float(connector.timeout_seconds),
        )

    @property
    def key(self) -> tuple[Any, ...]:
        """Two servers with one key are one server, reached the same way with the same secrets."""
        return (
            self.label,
            self.transport,
            self.url,
            tuple(sorted(self.headers.items())),
            self.argv,
            tuple(sorted(self.env.items())),
            self.timeout,
        )

    @property
    def secrets(self) -> list[str]:
        """Every value a message must never show."""
        values = [*self.headers.values(), *self.env.values()]
        for value in self.headers.values():
            scheme, _, credential = value.partition(" ")
            if scheme and credential.strip():
                values.append(credential.strip())
        return [value for value in values if value]

    def __repr__(self) -> str:
        # Deliberately without headers and env: reprs end up in logs.
        where = self.url if self.transport == "http" else " ".join(self.argv[:1])
        return f"<McpServer {self.label} {self.transport} {redact_credentials(where)}>"


def _text_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if v is not None}


class _Unreachable(Exception):
    """The server could not be reached or refused the handshake: nothing was called."""


@contextlib.asynccontextmanager
async def connected(server: McpServer) -> AsyncIterator[Any]:
    """An initialised ``mcp.Client`` session with ``server``; :class:`ToolError` if it cannot be
    had. Enter and leave it in one task (the SDK's task groups require it)."""
    # Imported here: the SDK is heavy and only MCP connectors need it.
    from mcp import Client

    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            transport = _transport(server, errlog)
            client = Client(
                transport,
                read_timeout_seconds=server.timeout,
                mode="auto",
                cache=None,
                client_info=_client_info(),
            )
        except (ValueError, OSError) as exc:
            raise ToolError(f"{server.label}: the MCP server cannot be started ({exc})") from None
        # What the block inside raises goes through the session's own exit, so that the SDK's task
        # group can say what broke the session (it may have cancelled the block to stop it).
        stage = "connecting"
        try:
            async with client:
                stage = "in use"
                yield client
                stage = "done"
        except Exception as exc:
            if stage == "connecting":
                why = _reason(exc, errlog)
                raise ToolError(
                    f"{server.label}: could not reach the MCP server ({why}); nothing was called"
                ) from None
            if stage == "in use":
                raise
            # Closing a session whose server went away once the block was done: the outcome was
            # decided already and is not replaced by a teardown error.
            log.debug("closing the session with %r failed", server, exc_info=True)


def _client_info() -> Any:
    from mcp.types import Implementation

    return Implementation(name=CLIENT_NAME, version="1")


def _transport(server: McpServer, errlog: Any) -> Any:
    if server.transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        if not server.argv:
            raise ValueError("the connector has no command")
        params = StdioServerParameters(
            command=server.argv[0],
            args=list(server.argv[1:]),
            env={**BASE_ENV, "HOME": str(settings.HOOK_COMMAND_CWD), **server.env},
            cwd=str(settings.HOOK_COMMAND_CWD),
        )
        return stdio_client(params, errlog=errlog)
    if server.transport == "http":
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http_client = httpx2.AsyncClient(
            headers=server.headers,
            timeout=httpx2.Timeout(server.timeout, read=max(server.timeout, 30.0) + 5.0),
            transport=egress.async_transport(http=httpx2),
        )
        return streamable_http_client(server.url, http_client=http_client)
    raise ValueError(f"unknown MCP transport {server.transport!r}")


def _reason(exc: BaseException, errlog: Any = None) -> str:
    """One line saying why, from the exception (the first of a group) and a stdio server's stderr."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    if isinstance(exc, egress.EgressRefused):
        text = f"{exc}; nothing was sent"
    if errlog is not None:
        with contextlib.suppress(OSError, ValueError):
            errlog.seek(0)
            tail = " ".join(errlog.read()[-STDERR_EXCERPT:].split())
            if tail:
                text += f"; the server said: {tail}"
    return text


class _Kept:
    """One session held open by a task of its own (the SDK's task groups must be left by the task
    that entered them); calls from any task of the loop use :attr:`client`."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.client: Any = None
        self.used_at = time.monotonic()
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._failure: BaseException | None = None
        self._task = asyncio.get_running_loop().create_task(self._hold())

    async def _hold(self) -> None:
        try:
            async with connected(self.server) as client:
                self.client = client
                self._ready.set()
                while not self._stop.is_set():
                    idle = IDLE_SECONDS - (time.monotonic() - self.used_at)
                    if idle <= 0:
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), idle)
        except BaseException as exc:  # reported to the caller waiting for the session
            self._failure = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            self.client = None
            self._stop.set()
            self._ready.set()

    async def opened(self) -> Any:
        await self._ready.wait()
        if self.client is None:
            if isinstance(self._failure, ToolError):
                raise self._failure
            raise ToolError(f"{self.server.label}: could not reach the MCP server; nothing was called")
        return self.client

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        self._stop.set()


class SessionPool:
    """The sessions kept open on one event loop, one per server (see the module docstring)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[Any, ...], _Kept] = {}
        self._locks: dict[tuple[Any, ...], asyncio.Lock] = {}

    async def client(self, server: McpServer) -> tuple[Any, _Kept]:
        """A session with ``server`` known to be alive a moment ago, or :class:`ToolError`."""
        key = server.key
        async with self._locks.setdefault(key, asyncio.Lock()):
            kept = self._kept.get(key)
            if kept is not None and not kept.closed:
                client = await kept.opened()
                if time.monotonic() - kept.used_at <= PING_AFTER_SECONDS:
                    kept.used_at = time.monotonic()
                    return client, kept
                try:
                    async with asyncio.timeout(min(server.timeout, 5.0)):
                        await _still_there(client)
                    kept.used_at = time.monotonic()
                    return client, kept
                except Exception:  # gone while idle: nothing was sent, open a new session
                    kept.close()
            kept = _Kept(server)
            self._kept[key] = kept
            try:
                client = await kept.opened()
            except ToolError:
                self._kept.pop(key, None)
                raise
            kept.used_at = time.monotonic()
            return client, kept


async def _still_there(client: Any) -> None:
    """One cheap round trip, or an exception: ``server/discover`` on the stateless protocol
    (2026-07-28 on), ``ping`` before it (where ``ping`` still exists)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    version = client.protocol_version
    if version in MODERN_PROTOCOL_VERSIONS:
        await client.session.send_discover(version)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated only for the protocol handled above
        await client.send_ping()


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SessionPool] = weakref.WeakKeyDictionary()


def keep_sessions_on(loop: asyncio.AbstractEventLoop) -> None:
    """Let MCP calls on ``loop`` keep their sessions open between calls: only for a loop that lives
    as long as the process (its sessions, and stdio servers' processes, end with it)."""
    _pools.setdefault(loop, SessionPool())


@contextlib.asynccontextmanager
async def session_for(server: McpServer) -> AsyncIterator[Any]:
    """A session with ``server``: a kept one on a loop that keeps them, else one for this call."""
    pool = _pools.get(asyncio.get_running_loop())
    if pool is None:
        async with connected(server) as client:
            yield client
        return
    client, kept = await pool.client(server)
    try:
        yield client
    except OutcomeUnknown:
        kept.close()  # the server went away (or hangs): the next call opens a new session
        raise
    finally:
        kept.used_at = time.monotonic()


async def list_remote_tools(server: McpServer) -> list[RemoteTool]:
    """Every tool the server lists (all pages), or :class:`ToolError` saying why not."""
    tools: list[RemoteTool] = []
    async with connected(server) as client:
        cursor: str | None = None
        try:
            for _page in range(100):  # a server whose pages never end cannot hang the admin
                page = await client.list_tools(cursor=cursor)
                tools.extend(_remote(tool) for tool in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as exc:
            why = _reason(exc)
            raise ToolError(f"{server.label}: the MCP server did not list its tools ({why})") from None
    return tools


def _remote(tool: Any) -> RemoteTool:
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    schema = dict(tool.input_schema or EMPTY_OBJECT_SCHEMA)
    return RemoteTool(
        name=tool.name,
        description=tool.description or "",
        input_schema=schema,
        annotations=annotations,
        title=tool.title or annotations.get("title") or "",
    )


class McpTool(Tool):
    """One tool of an MCP connector (a :class:`~agents.models.ConnectorAction` whose
    ``remote_name`` is the server's name for it)."""

    stops_on_cancel = True

    def __init__(self, *, action: Any, connector: Any) -> None:
        self.spec = ToolSpec(
            name=action.tool_name,
            description=action.description or action.remote_name,
            parameters=action.parameters_schema or dict(EMPTY_OBJECT_SCHEMA),
            requires_confirmation=bool(action.requires_confirmation),
            is_write=bool(action.is_write),
            title=action.title,
        )
        self.remote_name = action.remote_name or action.name
        self.server = McpServer.of(connector)
        # Hook matchers written Claude Code's way (mcp__<server>__<tool>) find the tool by it.
        self.call_facts = {MCP_ALIAS: f"{CLAUDE_MCP_PREFIX}{self.spec.name}"}

    @property
    def reads_only(self) -> bool:
        return not (self.spec.is_write or self.spec.requires_confirmation)

    def __repr__(self) -> str:
        return f"<McpTool {self.name} on {self.server!r}>"

    async def run(self, args: dict[str, Any]) -> Any:
        try:
            return await self._call(args)
        except ToolError as exc:
            # OutcomeUnknown stays itself: it is a ToolError the pipeline records differently.
            raise type(exc)(redact_credentials(str(exc), secrets=self.server.secrets)) from None

    async def _call(self, args: dict[str, Any]) -> Any:

        server, where = self.server, f"{self.server.label}: {self.remote_name}"
        try:
            async with session_for(server) as client:
                result = await self._call_on(client, args, where)
        except ToolError:
            raise
        except Exception as exc:  # the session broke while the call was out (the SDK says so on exit)
            raise OutcomeUnknown(f"the call of {where} was interrupted ({_reason(exc)})") from None
        if result.is_error:
            raise ToolError(f"{where}: {_content_text(result.content) or 'the server reported an error'}")
        if result.structured_content is not None:
            return result.structured_content
        return _content_text(result.content)

    async def _call_on(self, client: Any, args: dict[str, Any], where: str) -> Any:
        from mcp.shared.exceptions import MCPError

        server = self.server
        try:
            return await client.call_tool(self.remote_name, args, read_timeout_seconds=server.timeout)
        except MCPError as exc:
            code = getattr(exc, "code", None)
            if code == REQUEST_TIMEOUT:
                raise OutcomeUnknown(
                    f"{where} did not answer within {server.timeout:g}s; the server was asked to "
                    "cancel the call, and it may or may not have taken effect"
                ) from None
            if code == CONNECTION_CLOSED:
                raise OutcomeUnknown(f"the MCP server disconnected during the call of {where}") from None
            raise ToolError(f"{where}: the server refused the call ({exc})") from None
        except Exception as exc:
            raise OutcomeUnknown(f"the call of {where} was interrupted ({_reason(exc)})") from None


def _content_text(blocks: Any) -> str:
    """Content blocks as the text a model reads."""
    parts: list[str] = []
    for block in blocks or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(getattr(block, "data", "") or "") * 3 // 4
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '')}, about {size} bytes]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    text = "\n".join(parts)
    if len(text) > MAX_TEXT_CHARS:
        return text[:MAX_TEXT_CHARS] + f"\n… [cut: the answer was longer than {MAX_TEXT_CHARS} characters]"
    return text
