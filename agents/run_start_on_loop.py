"""Starting a run in a transaction on the event loop (PostgreSQL, :mod:`fimone.adb`), for a door
whose caller waits on the loop for the run it starts (the MCP gateway).

:func:`agents.services.run_start` in the database thread costs a call more in compiling its
queries than the database takes to answer them. Here the same reads go to the server together
(one round trip, in a pipeline) and the rows they return are judged by the same rules:

* what is read is what ``run_start`` reads, each by the ORM's own queryset compiled once
  (:class:`fimone.rows.Compiled`): the agent's lock, then the agent with its organisation, the
  person's roles in it, the agent's hook declarations (``Agent.hook_declarations_query``) and
  the actions that give it tools (``agents.tools.toolbox.tool_actions``);
* what is decided is decided by ``run_start``'s own functions: ``services.check_run_start``,
  ``checks.hook_chain_of``, ``services.new_conversation`` / ``new_run`` (the rows written), and
  ``toolbox.tools_of_actions`` for the tools a driver needs next.

The caller holds a transaction on the connection (``async with db.transaction()``) and issues
the reads inside a pipeline (``async with db.pipeline()``) with any reads of its own; the agent's
lock is held until it commits, as in ``run_start``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Model
from psycopg import AsyncConnection, AsyncCursor

from agents.checks import hook_chain_of
from agents.models import Agent, Connector, ConnectorAction, Conversation, HookDeclaration, Run
from agents.services import (
    agent_lock,
    agent_to_start,
    check_conversation_open,
    check_run_start,
    new_conversation,
    new_run,
)
from agents.tools.base import Tool
from agents.tools.toolbox import ToolboxError, tool_actions, tools_of_actions
from fimone import adb, rows
from tenancy.permissions import member_roles_query

Tools = dict[str, Tool] | ToolboxError
"""The agent's tools, or why they cannot be built (for the drive to report)."""


def _named(model: type[Model], prefix: str = "") -> list[str]:
    """Lookups for every concrete field of ``model`` (through ``prefix``), in its field order."""
    return [f"{prefix}{field.name}" for field in model._meta.concrete_fields]


@functools.cache
def _lock_sql() -> rows.Compiled:
    return rows.Compiled.of(lambda agent_id: agent_lock(agent_id=agent_id), agent_id=int)


@functools.cache
def _agent_sql() -> rows.Compiled:
    organization = Agent._meta.get_field("organization").related_model
    return rows.Compiled.of(
        lambda agent_id: agent_to_start(agent_id=agent_id).values_list(
            *_named(Agent), *_named(organization, "organization__")
        ),
        agent_id=int,
    )


@functools.cache
def _roles_sql() -> rows.Compiled:
    return rows.Compiled.of(member_roles_query, user_id=int, organization_id=int)


@functools.cache
def _declarations_sql() -> rows.Compiled:
    return rows.Compiled.of(
        lambda agent_id, organization_id: (
            Agent(pk=agent_id, organization_id=organization_id)
            .hook_declarations_query()
            .values_list(*_named(HookDeclaration))
        ),
        agent_id=int,
        organization_id=int,
    )


@functools.cache
def _actions_sql() -> rows.Compiled:
    return rows.Compiled.of(
        lambda agent_id, organization_id: tool_actions(
            Agent(pk=agent_id, organization_id=organization_id)
        ).values_list(*_named(ConnectorAction), *_named(Connector, "connector__")),
        agent_id=int,
        organization_id=int,
    )


def compile_statements() -> None:
    """Compile :func:`start_reads`' statements (in a thread, once; see ``rows.Compiled.of``)."""
    for compiled in (_lock_sql, _agent_sql, _roles_sql, _declarations_sql, _actions_sql):
        compiled()


@dataclass
class StartReads:
    """What :func:`run_start_async` reads, sent and not yet answered (their cursors)."""

    lock: AsyncCursor[Any]
    agent: AsyncCursor[Any]
    roles: AsyncCursor[Any]
    declarations: AsyncCursor[Any]
    actions: AsyncCursor[Any]


async def start_reads(
    db: AsyncConnection, *, agent_id: int, organization_id: int, user_id: int
) -> StartReads:
    """Send ``run_start``'s reads for a run of agent ``agent_id`` (of ``organization_id``) for
    user ``user_id``, the agent's lock first (every other read then sees what committed before
    it). In a pipeline the rows are awaited only when :func:`run_start_async` reads them.
    Precondition: :func:`compile_statements` ran."""
    lock, agent, roles = _lock_sql(), _agent_sql(), _roles_sql()
    declarations, actions = _declarations_sql(), _actions_sql()
    of_agent = {"agent_id": agent_id, "organization_id": organization_id}
    return StartReads(
        # The lock alone first: the reads after it begin once it is granted (services.agent_lock).
        lock=await adb.execute(db, lock.sql, lock.bind(agent_id=agent_id)),
        agent=await adb.execute(db, agent.sql, agent.bind(agent_id=agent_id)),
        roles=await adb.execute(db, roles.sql, roles.bind(user_id=user_id, organization_id=organization_id)),
        declarations=await adb.execute(db, declarations.sql, declarations.bind(**of_agent)),
        actions=await adb.execute(db, actions.sql, actions.bind(**of_agent)),
    )


@dataclass(frozen=True)
class Started:
    """A run created (claimed by its starter) and the agent's tools, read with it."""

    run: Run
    tools: Tools


async def run_start_async(
    db: AsyncConnection,
    reads: StartReads,
    *,
    user: Any,
    input: str | Callable[[Tools], str],
    execution_path: str,
    claimed_by: str,
    linked: Model | None = None,
    conversation: Conversation | None = None,
) -> Started:
    """``agents.services.run_start(..., dispatch=False, claimed_by=claimed_by)`` on the loop,
    from ``reads`` (:func:`start_reads`), with the same :class:`~fimone.errors.ServiceError`
    refusals. ``input``: the run's opening text, or a function of the agent's tools (read with
    the run) that makes it. The conversation and the run are written in one statement, with
    ``linked`` (a new row whose ``run`` is this run: the gateway's call record) if given;
    ``conversation``: an existing one the run joins (read by the caller in the same transaction:
    an MCP client's session), else a new one.
    Precondition: the caller holds a transaction on ``db`` and commits it. The run comes with its
    agent, organisation, conversation and user, as ``agents.engine.store.run_load`` reads them."""
    await reads.lock.fetchall()
    agent_row = await reads.agent.fetchone()
    roles = {role for (role,) in await reads.roles.fetchall()}
    declarations = [_instance(HookDeclaration, row) for row in await reads.declarations.fetchall()]
    action_rows = await reads.actions.fetchall()
    if agent_row is None:
        raise Agent.DoesNotExist("the agent is gone")
    agent = _agent_with_organization(agent_row)
    try:
        tools: Tools = tools_of_actions(agent, _actions(action_rows))
    except ToolboxError as exc:
        tools = exc
    if callable(input):
        input = input(tools)
    text = check_run_start(agent=agent, user=user, roles=roles, input=input, execution_path=execution_path)
    if conversation is None:
        conversation = new_conversation(agent=agent, user=user, text=text)
        chain: list[Model] = [conversation]
    else:
        check_conversation_open(conversation=conversation, agent=agent, user=user)
        chain = []
    run = new_run(
        agent=agent,
        user=user,
        conversation=conversation,
        text=text,
        execution_path=execution_path,
        hook_chain=hook_chain_of(agent, declarations),
        claimed_by=claimed_by,
    )
    chain += [run] if linked is None else [run, linked]
    with adb.django_errors():
        ids = await adb.fetchone(db, *rows.insert_chain(chain))
    assert ids is not None  # an insert answers its row
    rows.chain_inserted(chain, ids)
    return Started(run=run, tools=tools)


def _instance(model: type[Model], values: Iterable[Any]) -> Any:
    return rows.instance(model, rows.all_fields(model), values)


def _agent_with_organization(row: tuple[Any, ...]) -> Agent:
    take = rows.taker(row)
    agent = _instance(Agent, take(len(rows.all_fields(Agent))))
    organization_model = Agent._meta.get_field("organization").related_model
    agent.organization = _instance(organization_model, take(len(rows.all_fields(organization_model))))
    return agent


def _actions(found: list[tuple[Any, ...]]) -> list[ConnectorAction]:
    actions = []
    width = len(rows.all_fields(ConnectorAction))
    for row in found:
        action = _instance(ConnectorAction, row[:width])
        action.connector = _instance(Connector, row[width:])
        actions.append(action)
    return actions
