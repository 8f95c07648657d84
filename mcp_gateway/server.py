"""The MCP endpoint: ``/mcp/<gateway key>/``, Streamable HTTP, served by the official SDK's server.

:class:`GatewayApp` is an ASGI app that the project's ASGI router puts in front of Django for
``/mcp/…``. For every HTTP request it

1. reads the person's API token from ``Authorization: Bearer <token>`` (``Token <token>`` too) and
   answers 401 without one that is valid, before anything else is read;
2. finds the gateway the key names, for that person (:func:`services.gateway_for_user`): 404 when
   there is none for them, 403 for a member who may not chat. On PostgreSQL the token, the
   gateway and the person's roles are read in one statement on the event loop
   (``selectors.caller_rows_async``) and judged by the same checks
   (:func:`services.check_gateway_caller`);
3. hands the request to the SDK's Streamable HTTP session manager (stateless: any server of the
   deployment answers any request), with the gateway and the person known to the handlers.

``tools/list`` answers the agent's tools (name, description, input schema, and hints: a tool that
only reads says ``readOnlyHint``; one that asks a person first says ``destructiveHint``).
``tools/call`` starts the call as a run of the agent (:func:`services.gateway_call_start`) and
drives it here, in this server's event loop, through the agent's hooks and approval gate. While a
person's approval is pending the client receives progress notifications (when it asked for them,
with a progress token) every :data:`PROGRESS_SECONDS`, and the answer once the run ended: the
result, or ``isError`` naming the refusal. The verdict resumes the run wherever runs are resumed
(a worker); this request only waits for its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import importlib.metadata
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.urls import reverse
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import CallToolResult, ListToolsResult, TextContent, ToolAnnotations
from mcp.types import Tool as McpTool
from rest_framework.authtoken.models import Token

from agents.engine.db import db
from agents.engine.runner import new_owner, run_drive_claimed
from agents.engine.store import opening_of_new_run
from agents.tools.base import Tool, readable_tool_name
from approvals.models import ConfirmationRequest, ConfirmationStatus
from fimone import adb
from fimone.errors import ServiceError
from mcp_gateway import selectors, services
from mcp_gateway.engine import GatewayCallEngine, tools_or_error
from mcp_gateway.models import GatewayCall

log = logging.getLogger(__name__)

PATH_RE = re.compile(r"^/mcp/(?P<key>[A-Za-z0-9_-]{8,40})/?$")
PROGRESS_SECONDS = 5.0
POLL_SECONDS = (0.05, 0.1, 0.2, 0.5, 1.0)
"""How often the end of a parked run is looked for: quickly at first, then once a second."""


@dataclass(frozen=True)
class Caller:
    """Who calls through which gateway, as checked at the start of this HTTP request."""

    gateway: Any
    user: Any
    base_url: str = ""
    """Where the portal's links start for this caller (:func:`_base_url_of`)."""


_executions: set[asyncio.Task[Any]] = set()
"""Runs being driven for clients, kept referenced until they end."""

_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("mcp_gateway_caller", default=None)


def _db(fn: Any) -> Any:
    """``fn`` run in the database thread the engine's calls use (``agents.engine.db``): its
    connection is kept between calls, and dropped only once it broke. (Django's
    ``close_old_connections`` around each call would hand it back to the pool and take it again,
    twice per call, on the path every MCP call takes.)"""

    async def call(*args: Any, **kwargs: Any) -> Any:
        return await db(lambda: fn(*args, **kwargs))

    return call


# --- who calls --------------------------------------------------------------------------------------


def _token_of(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() in ("bearer", "token") and token.strip():
                return token.strip()
    return None


CallerCheck = tuple[Caller | None, int, str]
"""``(caller, status, message)``: a caller, or why not with the HTTP status to answer."""


def caller_for(token: str, key: str) -> CallerCheck:
    """Who calls (:data:`CallerCheck`), read through the ORM (in the database thread)."""
    row = Token.objects.select_related("user").filter(key=token).first()
    user = row.user if row is not None else None
    return _checked(user, lambda: services.gateway_for_user(key=key, user=user))


async def caller_for_on_loop(token: str, key: str) -> CallerCheck:
    """:func:`caller_for` on the event loop: the same rows read in one statement
    (``selectors.caller_rows_async``, PostgreSQL), the same checks."""
    async with adb.connection() as connection:
        user, gateway, roles = await selectors.caller_rows_async(connection, token=token, key=key)
    check = services.check_gateway_caller
    return _checked(user, lambda: check(gateway=gateway, user=user, roles=lambda: roles))


def _checked(user: Any, gateway_of: Callable[[], Any]) -> CallerCheck:
    if user is None or not user.is_active:
        return None, 401, "invalid API token"
    try:
        gateway = gateway_of()
    except ServiceError as exc:
        return None, (403 if exc.code == "forbidden" else 404), exc.message
    return Caller(gateway=gateway, user=user), 200, ""


# --- the handlers -----------------------------------------------------------------------------------


def _caller_now() -> Caller:
    caller = _caller.get()
    if caller is None:  # only GatewayApp reaches the handlers, and it always sets one
        raise RuntimeError("no gateway caller")
    return caller


def _tools_of(caller: Caller) -> dict[str, Tool]:
    return services.gateway_tools(gateway=caller.gateway)


def _tool_listing(tool: Tool) -> Any:

    spec = tool.spec
    hints = ToolAnnotations(
        title=spec.display,
        readOnlyHint=tool.reads_only or not (spec.is_write or spec.requires_confirmation),
        destructiveHint=bool(spec.requires_confirmation),
    )
    return McpTool(
        name=spec.name,
        title=spec.display,
        description=spec.description,
        inputSchema=spec.parameters,
        annotations=hints,
    )


_listed_schemas: dict[int, dict[str, Any]] = {}
"""Per gateway, the input schema of each tool it last listed in this process (see
:func:`listed_input_schema`)."""


async def list_tools(ctx: Any, params: Any) -> Any:

    caller = _caller_now()
    tools = await _db(_tools_of)(caller)
    _listed_schemas[caller.gateway.pk] = {name: tool.spec.parameters for name, tool in tools.items()}
    return ListToolsResult(tools=[_tool_listing(tool) for tool in tools.values()])


def listed_input_schema(name: str) -> dict[str, Any] | None:
    """The input schema the SDK checks a call's ``Mcp-Param-*`` headers against: the one this
    process listed for the caller's gateway (a client learns of such headers from a listing).
    ``None`` (nothing to check) for a tool not listed here: the SDK would otherwise list the
    tools again, from the database, before every call. The call itself is checked against the
    agent's tools of the moment by the run, whatever the headers say."""
    caller = _caller.get()
    return _listed_schemas.get(caller.gateway.pk, {}).get(name) if caller is not None else None


@dataclass(frozen=True)
class Started:
    """A call started as a run (or found again), with what driving a new one needs: its run,
    created with this server's lease (no claim to make), the call's record and the agent's tools,
    so that the engine reads nothing again before the call goes through the pipeline."""

    call_id: int
    run_id: int
    fresh: bool
    drive: dict[str, Any] | None = None
    """For a new run: ``run_drive_claimed``'s keyword arguments."""


def _start(caller: Caller, name: str, arguments: dict[str, Any]) -> Started:
    """The call as a run (module docstring). A tool the agent does not have is the run's to
    refuse, as any path's unknown tool is: the refusal is on the record."""
    owner = new_owner()
    tools = tools_or_error(caller.gateway.agent)  # the run's, and what its opening text names
    call, fresh = services.gateway_call_start(
        gateway=caller.gateway,
        user=caller.user,
        tool_name=name,
        arguments=arguments,
        claimed_by=owner,
        tools=tools,
    )
    if not fresh:
        return Started(call.pk, call.run_id, fresh=False)
    run = call.run
    return _fresh(owner, run, call, tools, opening_of_new_run(run))


async def _start_on_loop(caller: Caller, name: str, arguments: dict[str, Any]) -> Started:
    """:func:`_start` in one transaction on the event loop (PostgreSQL:
    ``services.gateway_call_start_async``)."""
    owner = new_owner()
    async with adb.connection() as connection:
        start = await services.gateway_call_start_async(
            connection,
            gateway=caller.gateway,
            user=caller.user,
            tool_name=name,
            arguments=arguments,
            claimed_by=owner,
        )
    if start.started is None:
        return Started(start.call_id, start.run_id, fresh=False)
    run = start.started.run
    return _fresh(owner, run, start.call, start.started.tools, opening_of_new_run(run, started_on_loop=True))


def _fresh(owner: str, run: Any, call: GatewayCall, tools: Any, opening: Any) -> Started:
    """A new call's run, with what driving it needs (``run_drive_claimed``'s arguments)."""
    drive = {
        "owner": owner,
        "kind": (run.agent.engine, run.execution_path, GatewayCallEngine),
        "opening": opening,
        "call": call,
        "tools": tools,
    }
    return Started(call.pk, run.pk, fresh=True, drive=drive)


async def call_tool(ctx: Any, params: Any) -> Any:

    caller = _caller_now()
    arguments = params.arguments if isinstance(params.arguments, dict) else {}
    try:
        if adb.available():  # PostgreSQL: the start's reads and writes in one transaction on the loop
            started = await _start_on_loop(caller, params.name, arguments)
        else:
            started = await _db(_start)(caller, params.name, arguments)
    except ServiceError as exc:
        return _result(services.Answer(f"Refused: {exc.message}", is_error=True))
    ended: asyncio.Future[str] | None = None
    if started.drive is not None:
        # Driven here, in this server's loop, where the client waits: an ungated call answers
        # without a hop to a worker. A parked run is resumed by the verdict, wherever runs resume.
        # A task of its own: a client that goes away stops waiting, never the run. The client
        # is answered once the run's ending (or parking) is written (``ended``), while the run's
        # last events still leave for its stream.
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        execution = loop.create_task(run_drive_claimed(started.run_id, **{**started.drive, "ended": ended}))
        _executions.add(execution)
        execution.add_done_callback(_execution_ended)
        execution.add_done_callback(lambda _task: ended.cancel())  # a drive that crashed before it
    answer = await _wait_for_answer(ctx, started.call_id, ended, base_url=caller.base_url)
    return _result(answer)


def _execution_ended(task: asyncio.Task[Any]) -> None:
    _executions.discard(task)
    if not task.cancelled() and task.exception() is not None:
        # The run's lease runs out and the sweep resumes it elsewhere; the client waits for that.
        log.error("an MCP gateway call's run failed to be driven", exc_info=task.exception())


def _answer_once_ended(call_id: int) -> services.Answer | None:
    """The call's answer once its run ended, marked delivered (it is handed to the client now)."""
    answer = services.gateway_call_answer(call_id=call_id)
    if answer is not None:
        services.gateway_call_delivered(call_id=call_id)
    return answer


async def _answer_once_ended_on_loop(call_id: int) -> services.Answer | None:
    """:func:`_answer_once_ended` in one statement on the event loop (PostgreSQL)."""
    async with adb.connection() as connection:
        return await services.gateway_call_answer_delivered_async(connection, call_id=call_id)


async def _wait_for_answer(
    ctx: Any, call_id: int, ended: asyncio.Future[str] | None, *, base_url: str
) -> services.Answer:
    """The call's answer, once its run ended; progress notifications meanwhile (the gate's inline
    wait included, while the run driven here has neither ended nor parked: ``ended`` not done)."""
    answer_of = _answer_once_ended_on_loop if adb.available() else _db(_answer_once_ended)
    waiting_text = _db(_waiting_text)
    loop = asyncio.get_running_loop()
    next_progress, ticks, polls = loop.time() + PROGRESS_SECONDS, 0, 0
    while True:
        if ended is not None and not ended.done():
            await asyncio.wait({ended}, timeout=max(0.0, next_progress - loop.time()))
        if ended is None or ended.done():
            answer = await answer_of(call_id)
            if answer is not None:
                return answer
        driven_elsewhere = ended is None or ended.done()
        if loop.time() >= next_progress or (driven_elsewhere and ticks == 0):
            ticks += 1
            with contextlib.suppress(Exception):  # a client that asked for no progress gets none
                await ctx.session.report_progress(ticks, None, await waiting_text(call_id, base_url))
            next_progress = loop.time() + PROGRESS_SECONDS
        if driven_elsewhere:
            await asyncio.sleep(POLL_SECONDS[min(polls, len(POLL_SECONDS) - 1)])
            polls += 1


def _waiting_text(call_id: int, base_url: str) -> str:
    """What a client waiting on a call is told: running, or waiting for a person's approval until
    when, and where the caller can follow it (their conversation in the portal, which shows who
    may decide) — a page, not an internal id."""
    call = GatewayCall.objects.select_related("run").get(pk=call_id)
    # Pending whether the run waits inline for it (still running) or parked on it.
    request = (
        ConfirmationRequest.objects.filter(
            run=call.run, tool_call_id=call.tool_call_id, status=ConfirmationStatus.PENDING
        )
        .values("expires_at", "tool_title")
        .first()
    )
    if request is None:
        return f"{readable_tool_name(call.tool_name)}: running"
    title = request["tool_title"] or readable_tool_name(call.tool_name)
    page = (base_url or settings.SITE_URL) + reverse("portal:conversation", args=[call.run.conversation_id])
    until = f"until {request['expires_at']:%H:%M} UTC" if request["expires_at"] else "with no deadline"
    return f"{title}: waiting for a person's approval {until}; follow it at {page}"


def _result(answer: services.Answer) -> Any:

    return CallToolResult(
        content=[TextContent(type="text", text=answer.text)],
        structuredContent=answer.structured,
        isError=answer.is_error,
    )


# --- the ASGI app -----------------------------------------------------------------------------------


def build_server() -> Any:

    return Server(
        "fimone-gateway",
        version=importlib.metadata.version("fimone-hooks"),  # what clients show beside its name
        instructions="Tools of one FIM One agent, behind its hooks and a person's approval where it asks.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=listed_input_schema,
    )


class GatewayApp:
    """ASGI app for ``/mcp/<key>/`` (module docstring). One session manager per event loop,
    started on that loop's first request and kept for its life."""

    def __init__(self) -> None:
        self._managers: dict[asyncio.AbstractEventLoop, Any] = {}
        self._keep: set[asyncio.Task[Any]] = set()

    async def _manager(self) -> Any:
        loop = asyncio.get_running_loop()
        manager = self._managers.get(loop)
        if manager is not None:
            return manager

        manager = StreamableHTTPSessionManager(app=build_server(), stateless=True, json_response=False)
        self._managers[loop] = manager
        ready = asyncio.Event()

        async def run_forever() -> None:
            async with manager.run():
                ready.set()
                await asyncio.Event().wait()

        task = loop.create_task(run_forever(), context=contextvars.Context())
        self._keep.add(task)
        await ready.wait()
        return manager

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        match = PATH_RE.match(scope.get("path", ""))
        if match is None:
            await _plain(send, 404, "not found")
            return
        token = _token_of(scope.get("headers", []))
        if token is None:
            await _plain(send, 401, "an API token is needed: Authorization: Bearer <token>")
            return
        if adb.available():  # PostgreSQL: one statement on the loop, no trip to the thread
            caller, status, message = await caller_for_on_loop(token, match["key"])
        else:
            caller, status, message = await _db(caller_for)(token, match["key"])
        if caller is None:
            await _plain(send, status, message)
            return
        manager = await self._manager()
        reset = _caller.set(dataclasses.replace(caller, base_url=_base_url_of(scope)))
        try:
            await manager.handle_request(scope, receive, send)
        finally:
            _caller.reset(reset)


def _base_url_of(scope: dict[str, Any]) -> str:
    """``SITE_URL``, or, in development without one, the address the request came in on (as
    ``tenancy.invitations.public_base_url``: a link works on whatever host and port the server
    runs). The link goes back only to the client that sent the ``Host``."""
    if not settings.SITE_URL_FROM_REQUEST:
        return settings.SITE_URL
    host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
    if not host:
        return settings.SITE_URL
    return f"{scope.get('scheme', 'http')}://{host}"


async def _plain(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="fimone-mcp"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
