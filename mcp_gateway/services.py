"""The gateway's services: who may use a gateway, starting a client's call as a run, and what the
client is answered once that run ended.

Contracts:

* :func:`gateway_for_user` answers ``not_found`` for an unknown or switched-off key, for a gateway
  of an organisation the user is not a member of, and for an archived agent (a client is never
  told which); ``forbidden`` for a member who may not chat (an auditor).
* :func:`gateway_call_start` makes each ``tools/call`` a run of the gateway's agent
  (``execution_path="mcp"``), not dispatched: the gateway drives it where the client waits. Each
  new run takes from the person's run-start budget (``RUN_START_RATE``), as the API's do: past it
  the call is refused (``throttled``) and nothing starts. A call
  whose answer never reached its client (``delivered_at`` empty) is found again when the same user
  calls the same tool with the same arguments through the same gateway within
  :data:`RETRY_WINDOW`: the client is answered from that run, which never runs a second time.
  Also when the two calls arrive at the same moment (docs/design.md §1.5): each start holds the call's
  key (:func:`call_key_lock_id`) from before its retry lookup until it commits, so of two
  identical calls one starts the run and the other finds that call and waits for its answer.
* A new call joins the conversation of the person's previous call through the same gateway when
  that came within :data:`SESSION_IDLE` (a client's session reads as one conversation in the
  portal, one turn per call); an archived conversation is never joined. Calls of one session may
  run at the same time: none waits for another.
* :func:`gateway_call_answer` is ``None`` until the run ended; then the text the client reads and
  whether it is an error: the observation (after every PostToolUse hook) of a call that ran; for a
  refusal, who refused and why; for a tool error or an unknown outcome, that text.
* Both starts refuse (``invalid``) a call whose tool name or arguments no database stores (NaN,
  ±Infinity, NUL: ``fimone.storable``) before reading or writing anything, naming the field:
  "invalid arguments for erp__pay: amount is not a finite number" (docs/design.md §1.16).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Subquery
from django.utils import timezone
from psycopg import AsyncConnection
from rest_framework.authtoken.models import Token

from agents import events as ev
from agents import run_start_on_loop
from agents.engine.db import db as engine_db
from agents.engine.store import args_sha256
from agents.models import Conversation, ExecutionPath, Run, RunEvent, RunStatus
from agents.services import chat_refusal_of, run_start, run_starts_take, run_starts_take_async
from agents.tools.base import Tool
from agents.tools.toolbox import ToolboxError, tools_for_agent
from fimone import adb, rows
from fimone.errors import ServiceError
from fimone.storable import unstorable
from hooks.catalog import hook_catalog
from mcp_gateway.engine import tools_or_error
from mcp_gateway.models import Gateway, GatewayCall
from tenancy.permissions import member_roles

RETRY_WINDOW = dt.timedelta(hours=1)
"""How long an undelivered answer waits for its client to call again."""
SESSION_IDLE = dt.timedelta(minutes=30)
"""A client's session, as its person reads it in the portal: a person's calls through one gateway
join one conversation while each comes within this of the one before."""
TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})


@dataclass(frozen=True)
class Answer:
    """What the client reads for its call."""

    text: str
    is_error: bool
    structured: dict[str, Any] | None = None


def gateway_for_user(*, key: str, user: Any) -> Gateway:
    """The gateway at ``key`` if ``user`` may call through it (module docstring)."""
    gateway = (
        Gateway.objects.select_related("agent", "agent__organization", "organization")
        .filter(key=key, enabled=True)
        .first()
    )
    return check_gateway_caller(
        gateway=gateway,
        user=user,
        roles=lambda: member_roles(user=user, organization_id=gateway.organization_id),
    )


def check_gateway_caller(*, gateway: Gateway | None, user: Any, roles: Callable[[], set[str]]) -> Gateway:
    """``gateway`` (the switched-on one at the key asked for, with its agent and organisations,
    or ``None``) if ``user`` may call through it (module docstring), else :class:`ServiceError`.
    ``roles()``: the user's roles in the gateway's organisation, asked for only once the gateway
    is known to be callable. The one place these rules live, whoever read the rows: the thread
    (:func:`gateway_for_user`) or the event loop (``selectors.caller_rows_async``). Reads
    nothing else: it may run on the loop."""
    if gateway is None or user is None or not user.is_active or gateway.agent.archived_reason() is not None:
        raise ServiceError("not found", code="not_found")
    member = roles()
    if not member:
        raise ServiceError("not found", code="not_found")
    refusal = chat_refusal_of(user=user, roles=member)
    if refusal is not None:
        raise ServiceError(refusal, code="forbidden")
    return gateway


def gateway_tools(*, gateway: Gateway) -> dict[str, Tool]:
    """The tools the gateway offers: its agent's own, as any of the agent's runs has them."""
    try:
        return tools_for_agent(gateway.agent)
    except ToolboxError as exc:
        raise ServiceError(f"the agent's tools cannot be built: {exc}", code="conflict") from None


def check_storable(*, tool_name: str, arguments: dict[str, Any]) -> None:
    """Refuse (``invalid``) arguments no database stores (NaN, ±Infinity, NUL: ``fimone.storable``)
    before anything is read or written: the client reads which field, never a database's error,
    and a call that cannot be recorded never becomes a run. Both starts ask it first."""
    named = unstorable(tool_name, name="the tool's name")
    if named is not None:
        raise ServiceError(f"invalid call: {named}", code="invalid")
    problem = unstorable(arguments, name="the arguments")
    if problem is not None:
        raise ServiceError(f"invalid arguments for {tool_name}: {problem}", code="invalid")


@transaction.atomic
def gateway_call_start(
    *,
    gateway: Gateway,
    user: Any,
    tool_name: str,
    arguments: dict[str, Any],
    claimed_by: str | None = None,
    tools: run_start_on_loop.Tools | None = None,
) -> tuple[GatewayCall, bool]:
    """The call ``tool_name(arguments)`` as a run, and whether it is new (``False``: the same
    call, never answered, was found again: module docstring). The run is not dispatched;
    ``claimed_by``: a new run is created with its lease held by that owner (``run_start``).
    ``tools``: the agent's tools if the caller has them (else read here), for the run's opening
    text (:func:`call_text`)."""
    check_storable(tool_name=tool_name, arguments=arguments)
    digest = args_sha256(arguments)
    _call_key_hold(gateway_id=gateway.pk, user_id=user.pk, tool_name=tool_name, digest=digest)
    earlier = (
        _undelivered(
            gateway_id=gateway.pk, user_id=user.pk, tool_name=tool_name, digest=digest, since=_retry_since()
        )
        .select_related("run")
        .first()
    )
    if earlier is not None:
        return earlier, False
    # A new run: from the same budget as every other door a person starts runs through.
    run_starts_take(user=user)
    if tools is None:
        tools = tools_or_error(gateway.agent)
    run = run_start(
        agent=gateway.agent,
        user=user,
        input=call_text(gateway=gateway, tool_name=tool_name, arguments=arguments, tools=tools),
        conversation=_session_conversation(
            gateway_id=gateway.pk, agent_id=gateway.agent_id, user_id=user.pk, since=_session_since()
        ).first(),
        execution_path=ExecutionPath.MCP,
        dispatch=False,
        claimed_by=claimed_by,
    )
    call = _new_call(gateway=gateway, user=user, tool_name=tool_name, arguments=arguments, digest=digest)
    call.run = run
    call.save(force_insert=True)
    return call, True


@dataclass(frozen=True)
class StartedOnLoop:
    """:func:`gateway_call_start_async`'s answer: the call's record and its run's id, and for a
    new run, the run and the agent's tools (``None``: the same call, found again)."""

    call_id: int
    run_id: int
    started: run_start_on_loop.Started | None
    call: GatewayCall | None = None


async def gateway_call_start_async(
    db: AsyncConnection,
    *,
    gateway: Gateway,
    user: Any,
    tool_name: str,
    arguments: dict[str, Any],
    claimed_by: str,
) -> StartedOnLoop:
    """:func:`gateway_call_start` in one transaction on the event loop, on ``db``
    (:mod:`fimone.adb`, PostgreSQL): the earlier call looked for and everything a new run's
    start reads, sent together (``agents.run_start_on_loop``); then, for a new call, the budget
    taken and the conversation, the run and the call written in one statement. Same rules, same
    refusals; ``gateway`` comes with its agent (``selectors.caller_rows_async``)."""
    check_storable(tool_name=tool_name, arguments=arguments)
    if not _compiled:
        await engine_db(compile_start_statements)
    digest = args_sha256(arguments)
    retry = _undelivered_sql()
    key = call_key_lock_id(gateway_id=gateway.pk, user_id=user.pk, tool_name=tool_name, digest=digest)
    async with db.transaction(), db.pipeline():
        # The call's key first, as on the thread's path (_call_key_hold): the lookup after it
        # begins once the key is granted, and so sees a call an identical start just committed.
        await adb.execute(db, CALL_KEY_LOCK_SQL, [key])
        earlier = await adb.execute(
            db,
            retry.sql,
            retry.bind(
                gateway_id=gateway.pk,
                user_id=user.pk,
                tool_name=tool_name,
                digest=digest,
                since=_retry_since(),
            ),
        )
        reads = await run_start_on_loop.start_reads(
            db, agent_id=gateway.agent_id, organization_id=gateway.agent.organization_id, user_id=user.pk
        )
        session = _session_conversation_sql()
        joined = await adb.execute(
            db,
            session.sql,
            session.bind(
                gateway_id=gateway.pk, agent_id=gateway.agent_id, user_id=user.pk, since=_session_since()
            ),
        )
        found = await earlier.fetchone()
        if found is not None:
            return StartedOnLoop(call_id=found[0], run_id=found[1], started=None)
        await run_starts_take_async(user=user)  # the same budget as the thread's path
        call = _new_call(gateway=gateway, user=user, tool_name=tool_name, arguments=arguments, digest=digest)

        def opening(tools: run_start_on_loop.Tools) -> str:
            return call_text(gateway=gateway, tool_name=tool_name, arguments=arguments, tools=tools)

        conversation = await joined.fetchone()
        started = await run_start_on_loop.run_start_async(
            db,
            reads,
            user=user,
            input=opening,
            execution_path=ExecutionPath.MCP,
            claimed_by=claimed_by,
            linked=call,
            conversation=None
            if conversation is None
            else rows.instance(Conversation, rows.all_fields(Conversation), conversation),
        )
    return StartedOnLoop(call_id=call.pk, run_id=started.run.pk, started=started, call=call)


CALL_KEY_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s::bigint)"
"""Hold a call's key (:func:`call_key_lock_id`) until the transaction ends (PostgreSQL)."""


def call_key_lock_id(*, gateway_id: int, user_id: int, tool_name: str, digest: str) -> int:
    """The number both starts lock for a call's key — the user, the gateway, the tool and the
    arguments' hash, what the retry lookup matches on — as a signed 64-bit PostgreSQL advisory
    lock. Two keys sharing a number only make their starts take turns."""
    key = f"mcp_gateway.call:{gateway_id}:{user_id}:{tool_name}:{digest}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big", signed=True)


def _call_key_hold(*, gateway_id: int, user_id: int, tool_name: str, digest: str) -> None:
    """Hold the call's key until the caller's transaction ends, before its retry lookup: an
    identical start waits here until this one committed its call (or rolled back), then its
    lookup finds that call. The retry lookup alone cannot do it: its row lock takes nothing when
    no row exists yet. Precondition: inside ``transaction.atomic``."""
    connection = transaction.get_connection()
    if connection.vendor == "postgresql":
        key = call_key_lock_id(gateway_id=gateway_id, user_id=user_id, tool_name=tool_name, digest=digest)
        with connection.cursor() as cursor:
            cursor.execute(CALL_KEY_LOCK_SQL, [key])
    # SQLite: the transaction already is the lock. It begins IMMEDIATE (settings), holding the
    # database's one write lock from its first statement, so a second start begins only after.


def _undelivered(*, gateway_id: int, user_id: int, tool_name: str, digest: str, since: dt.datetime) -> Any:
    """Calls of that user's, through that gateway, of that tool with those arguments, whose
    answer never reached the client, made since ``since``, latest first, locked."""
    return (
        GatewayCall.objects.select_for_update()
        .filter(
            gateway_id=gateway_id,
            user_id=user_id,
            tool_name=tool_name,
            args_sha256=digest,
            delivered_at__isnull=True,
            created_at__gte=since,
        )
        .order_by("-pk")
    )


_compiled: list[bool] = []
"""Not empty once :func:`compile_start_statements` ran in this process."""


def _session_conversation(*, gateway_id: int, agent_id: int, user_id: int, since: dt.datetime) -> Any:
    """The conversation a new call joins: the one the person's latest call through the gateway
    went to, if that call came since ``since`` (:data:`SESSION_IDLE`) and the conversation is
    still open and still the gateway's agent's (an archived one, or one of an agent the gateway
    no longer serves, is never joined: the call opens a new one)."""
    latest = (
        GatewayCall.objects.filter(gateway_id=gateway_id, user_id=user_id, created_at__gte=since)
        .order_by("-pk")
        .values("run__conversation_id")[:1]
    )
    return Conversation.objects.filter(
        pk=Subquery(latest), agent_id=agent_id, user_id=user_id, archived_at__isnull=True
    )


def _session_since() -> dt.datetime:
    return timezone.now() - SESSION_IDLE


@functools.cache
def _session_conversation_sql() -> rows.Compiled:
    return rows.Compiled.of(
        lambda **values: _session_conversation(**values).values_list(*rows.all_fields(Conversation)),
        gateway_id=int,
        agent_id=int,
        user_id=int,
        since=dt.datetime,
    )


def compile_start_statements() -> None:
    """Compile the statements :func:`gateway_call_start_async` sends (in the database thread,
    once per process: ``rows.Compiled.of``)."""
    _undelivered_sql()
    _session_conversation_sql()
    run_start_on_loop.compile_statements()
    _compiled.append(True)


@functools.cache
def _undelivered_sql() -> rows.Compiled:
    return rows.Compiled.of(
        lambda **values: _undelivered(**values).values_list("pk", "run_id")[:1],
        gateway_id=int,
        user_id=int,
        tool_name=str,
        digest=str,
        since=dt.datetime,
    )


def _retry_since() -> dt.datetime:
    return timezone.now() - RETRY_WINDOW


def call_text(
    *, gateway: Gateway, tool_name: str, arguments: dict[str, Any], tools: run_start_on_loop.Tools
) -> str:
    """The message a call's run starts with, what its conversation is titled and shows: the tool
    as people read it (its title among the agent's ``tools``; a tool the agent lacks by the name
    the client used), the arguments' values, and where the call came from — "Pay a purchase
    (PO-1001, 1200) — an MCP call through Procurement desk". The exact call is the run's step."""
    tool = tools.get(tool_name) if isinstance(tools, dict) else None
    said = tool.spec.display if tool is not None else tool_name
    values = ", ".join(_value_text(value) for value in arguments.values())
    if values:
        said += f" ({values[:120]}…)" if len(values) > 120 else f" ({values})"
    return f"{said} — an MCP call through {gateway.name}"


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _new_call(
    *, gateway: Gateway, user: Any, tool_name: str, arguments: dict[str, Any], digest: str
) -> GatewayCall:
    return GatewayCall(
        gateway=gateway,
        user=user,
        tool_name=tool_name,
        arguments=arguments,
        args_sha256=digest,
        tool_call_id=f"mcp-{uuid.uuid4().hex[:16]}",
    )


def gateway_call_answer(*, call_id: int) -> Answer | None:
    """What the client reads, once the call's run ended (module docstring)."""
    call = GatewayCall.objects.select_related("run").get(pk=call_id)
    run = call.run

    def blocked() -> dict[str, Any] | None:
        return (
            RunEvent.objects.filter(run=run, type=ev.TOOL_BLOCKED, payload__tool_call_id=call.tool_call_id)
            .values_list("payload", flat=True)
            .first()
        )

    return answer_of(status=run.status, output=run.output, error=run.error, blocked=blocked)


def answer_of(
    *, status: str, output: str, error: str, blocked: Callable[[], dict[str, Any] | None]
) -> Answer | None:
    """The answer of a call whose run is in ``status`` with ``output`` and ``error``; ``blocked()``:
    the payload of the call's ``tool.blocked`` event, if any (asked for only when the run failed
    or was cancelled). The one place these rules live, whoever read the run: the thread
    (:func:`gateway_call_answer`) or the event loop (``selectors.answer_rows_async``)."""
    if status not in TERMINAL:
        return None
    if status == RunStatus.COMPLETED:
        return Answer(output, is_error=False, structured=_structured(output))
    refusal = blocked()
    if refusal:
        return Answer(refusal_text(refusal), is_error=True)
    if status == RunStatus.CANCELLED:
        return Answer(f"The call was cancelled: {error or 'cancelled'}", is_error=True)
    return Answer(error or "The call failed.", is_error=True)


def refusal_text(refusal: dict[str, Any]) -> str:
    """A refused call as the client reads it: a person's verdict as the gate words it ("Rejected by
    april (keep it). The call was not executed."); a rule's refusal in its own words, said to come
    from a safety rule of the agent — a hook's internal name means nothing to a client."""
    reason = str(refusal.get("error") or "refused")
    hook = hook_catalog().get(str(refusal.get("blocked_by") or ""))
    if hook is not None and getattr(hook, "asks_humans", False):
        return f"Refused: {reason}"
    return f"Refused by a safety rule of this agent: {reason}"


async def gateway_call_answer_delivered_async(db: AsyncConnection, *, call_id: int) -> Answer | None:
    """:func:`gateway_call_answer`, and once there is one, the call marked delivered
    (:func:`gateway_call_delivered`), in one statement on the event loop, on ``db``
    (:mod:`fimone.adb`, PostgreSQL). Judged by the same rules (:func:`answer_of`)."""
    ended = sorted(str(status) for status in TERMINAL)
    row = await adb.fetchone(db, _answer_sql(), [call_id, timezone.now(), ended, ev.TOOL_BLOCKED])
    if row is None:
        raise GatewayCall.DoesNotExist(f"no MCP gateway call {call_id}")
    status, output, error, refusal = row  # the payload as the ORM's jsonb: text, parsed here
    return answer_of(
        status=status,
        output=output,
        error=error,
        blocked=lambda: json.loads(refusal) if isinstance(refusal, str) else refusal,
    )


@functools.cache  # our table and column names: the text never changes
def _answer_sql() -> str:
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    calls, runs, events = (quote(m._meta.db_table) for m in (GatewayCall, Run, RunEvent))
    # The first tool.blocked event of the call (by id, as the ORM's first() orders), and the
    # delivery mark only on a run that ended (what gateway_call_answer returns an answer for).
    return (
        f"WITH c AS (SELECT gc.id, gc.tool_call_id, r.id AS run_id, r.status, r.output, r.error "  # noqa: S608
        f"FROM {calls} gc JOIN {runs} r ON r.id = gc.run_id WHERE gc.id = %s), "
        f"d AS (UPDATE {calls} SET delivered_at = %s WHERE id = (SELECT id FROM c) "
        "AND delivered_at IS NULL AND (SELECT status FROM c) = ANY(%s)) "
        "SELECT c.status, c.output, c.error, "
        f"(SELECT e.payload FROM {events} e WHERE e.run_id = c.run_id AND e.type = %s "
        "AND e.payload ->> 'tool_call_id' = c.tool_call_id ORDER BY e.id LIMIT 1) FROM c"
    )


def _structured(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@transaction.atomic
def api_token_replace(*, user: Any) -> str:
    """A new API token for ``user``, replacing any they had (clients using the old one are refused
    from now on). The key is returned once, to be shown once; it is never shown again."""
    if user is None or not user.is_active:
        raise ServiceError("not found", code="not_found")
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user).key


def gateway_call_delivered(*, call_id: int) -> None:
    """The client has its answer: a later identical call is a new one."""
    GatewayCall.objects.filter(pk=call_id, delivered_at__isnull=True).update(delivered_at=timezone.now())
