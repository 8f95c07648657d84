"""Statements on the server's event loop: an asyncio pool of connections to the default
PostgreSQL database, for the one hot path that runs there (a card click, ``channels_im.quick``).

Django's database layer is synchronous: under ASGI every request that uses it runs in a thread
of its own, made for it, with a connection wrapper of its own taken from the pool, and that costs
a click about as much as deciding it does. Statements here run on the loop instead, in
autocommit, with the driver's own asyncio support (psycopg's ``AsyncConnectionPool``). The
connections are configured as Django configures its own (its adapters: ``jsonb`` read as text
for ``JSONField`` to parse, timestamps in the database's time zone; the session in UTC), so rows
read here become model instances through :mod:`fimone.rows` exactly as the ORM would make them.

No ORM call may happen on the loop (Django refuses them); whatever is not one of these few
statements goes to a thread as usual. Each event loop has its own pool (a pool belongs to the
loop that opened it); a server has one loop, so one pool, of ``DATABASE_POOL_MIN``..``MAX``
connections beside the threads' pool of the same size.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db import utils as django_db
from psycopg import AsyncConnection, AsyncCursor
from psycopg_pool import AsyncConnectionPool

_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[AsyncConnectionPool]] = (
    weakref.WeakKeyDictionary()
)


def available() -> bool:
    """Whether the default database can be reached from the loop (PostgreSQL)."""
    return connections[DEFAULT_DB_ALIAS].vendor == "postgresql"


def _prepare() -> bool:
    return settings.DATABASE_PREPARED_STATEMENTS


async def _configure(connection: AsyncConnection) -> None:
    """The session as Django sets up its own: in Django's time zone (UTC)."""
    wanted = connections[DEFAULT_DB_ALIAS].timezone_name
    if wanted and connection.info.parameter_status("TimeZone") != wanted:
        await connection.execute("SELECT set_config('TimeZone', %s, false)", [wanted])


def _connection_params() -> dict[str, Any]:
    params = connections[DEFAULT_DB_ALIAS].get_connection_params()  # Django's adapters; no I/O
    params.pop("cursor_factory", None)  # Django's synchronous cursor classes
    # psycopg prepares nothing, even when asked, without a threshold (see settings).
    params["prepare_threshold"] = 2**31 - 1 if _prepare() else None
    params["autocommit"] = True
    return params


async def connect() -> AsyncConnection:
    """One connection of the loop's own, configured as the pool's are, outside any pool: for a
    loop that lives less long than a pool would (the caller closes it)."""
    connection = await AsyncConnection.connect(**_connection_params())
    await _configure(connection)
    return connection


async def _open() -> AsyncConnectionPool:
    wrapper = connections[DEFAULT_DB_ALIAS]
    sizes = wrapper.settings_dict["OPTIONS"].get("pool") or {}
    pool = AsyncConnectionPool(
        kwargs=_connection_params(),
        min_size=sizes.get("min_size", 1),
        max_size=sizes.get("max_size", 20),
        timeout=sizes.get("timeout", 10.0),
        configure=_configure,
        open=False,
    )
    await pool.open()
    return pool


async def pool() -> AsyncConnectionPool:
    """The running loop's pool, opened on first use (concurrent first users share the opening)."""
    loop = asyncio.get_running_loop()
    opening = _pools.get(loop)
    if opening is None or (opening.done() and (opening.cancelled() or opening.exception() is not None)):
        opening = _pools[loop] = loop.create_task(_open())
    return await asyncio.shield(opening)


@contextlib.asynccontextmanager
async def connection() -> AsyncIterator[AsyncConnection]:
    """A connection of the running loop's pool, in autocommit, for the statements of one request
    (taking one from the pool costs about what running a statement does: take it once)."""
    # getconn/putconn rather than the pool's ``connection()``: that one also enters the
    # connection's own context, whose exit commits (here a no-op in autocommit, but an awaited
    # lock and a check per statement on the hottest path). putconn still rolls back and discards
    # a connection left in a transaction or broken.
    taken_from = await pool()
    taken = await taken_from.getconn()
    try:
        yield taken
    finally:
        await taken_from.putconn(taken)


async def execute(db: AsyncConnection, sql: str, params: Any) -> AsyncCursor[Any]:
    """One statement on ``db``, prepared per connection unless ``DATABASE_PREPARED_STATEMENTS``
    is false; its cursor (in a pipeline, sent: its rows are awaited when read)."""
    return await db.execute(sql, params, prepare=True if _prepare() else None)


async def fetchone(db: AsyncConnection, sql: str, params: Any) -> tuple[Any, ...] | None:
    """The first row of one statement on ``db`` (in autocommit, its own transaction)."""
    return await (await execute(db, sql, params)).fetchone()


async def close() -> None:
    """Close the running loop's pool, if it has one (a loop about to end: tests, shutdown)."""
    opening = _pools.pop(asyncio.get_running_loop(), None)
    if opening is not None and opening.done() and not opening.cancelled() and opening.exception() is None:
        await opening.result().close()


# Most specific first, as Django's own wrapper (``django.db.utils.DatabaseErrorWrapper``) checks them.
_DJANGO_ERRORS = (
    "DataError",
    "OperationalError",
    "IntegrityError",
    "InternalError",
    "ProgrammingError",
    "NotSupportedError",
    "DatabaseError",
    "InterfaceError",
    "Error",
)


@contextlib.contextmanager
def django_errors() -> Iterator[None]:
    """Raise psycopg's exceptions as Django's (``django.db.IntegrityError``, …), as the ORM
    would: callers catch the same exceptions whichever way a statement ran."""
    try:
        yield
    except psycopg.Error as exc:
        for name in _DJANGO_ERRORS:
            if isinstance(exc, getattr(psycopg, name)):
                raise getattr(django_db, name)(*exc.args) from exc
        raise
