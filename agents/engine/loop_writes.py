"""A run's step writes on the event loop, not in the database thread.

Every engine call to the ORM runs in one thread (:mod:`agents.engine.db`), and each trip there and
back costs a tool call more than the statement does (a quarter of a millisecond on a small host,
twice per tool call). The writes every step makes (:func:`agents.engine.batch.postgres_statement`:
one statement) need no ORM, so on PostgreSQL the journal runs them here, with psycopg's asyncio
support; everything else (claims, endings, reads) stays in the thread.

Connections: on a loop that lives as long as its process (the server's, the embedded executor's)
each write takes one from the loop's pool (:mod:`fimone.adb`) and gives it back, so concurrent
runs share a few; a loop made for one run (a Celery task's, a test's) would outlive no pool, so
the run opens one connection of its own at its first write and :meth:`LoopWriter.close` closes
it when the run stops driving.

Durability: a write is durable (``synchronous_commit`` as configured) unless the caller says it
need not be: then its statement commits without waiting for the disk
(:data:`agents.engine.batch.COMMIT_WITHOUT_WAITING`, in the statement itself, which stays one
prepared statement). Only a tool's outcome is written so (``agents.engine.pipeline``, unless
``RUN_OUTCOMES_WAIT_FOR_DISK`` is set): a database crash can lose at most the last such writes,
never a later durable one (the log is flushed in order), and a lost outcome reads back as the
call's start without an end — "outcome unknown" (docs/design.md §1.5), never a second execution.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from psycopg import AsyncConnection

from fimone import adb


class LoopWriter:
    """Runs one run's step statements on the running loop. Precondition: PostgreSQL, and the
    engine's database thread is not inside a transaction (its writes would not be in it)."""

    def __init__(self, *, pooled: bool) -> None:
        self.pooled = pooled
        self._own: AsyncConnection | None = None

    async def run(self, sql: str, params: list[Any]) -> Any:
        """Run one statement in its own transaction; return the first column of its row.
        psycopg's errors are raised as Django's (``IntegrityError``, …)."""
        with adb.django_errors():
            if self.pooled:
                async with adb.connection() as connection:
                    return await _run(connection, sql, params)
            connection = await self._connection()
            try:
                return await _run(connection, sql, params)
            finally:
                if connection.broken:
                    self._own = None
                    await connection.close()

    async def _connection(self) -> AsyncConnection:
        if self._own is None or self._own.closed:
            self._own = await adb.connect()
        return self._own

    async def close(self) -> None:
        """Close the run's own connection, if it opened one."""
        own, self._own = self._own, None
        if own is not None:
            await own.close()


async def _run(connection: AsyncConnection, sql: str, params: list[Any]) -> Any:
    prepare = True if settings.DATABASE_PREPARED_STATEMENTS else None
    cursor = await connection.execute(sql, params, prepare=prepare)
    row = await cursor.fetchone()
    return row[0] if row is not None else None
