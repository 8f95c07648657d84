"""What one engine write holds, and the one PostgreSQL statement that writes it.

Events, messages and tool executions are written on every step of every run. They are built as
plain SQL: on a small CPU, building them through the ORM cost several times what the database
takes to run them. On PostgreSQL a step's writes travel as ONE statement (data-modifying CTEs,
rows passed as one JSON document): one round trip, and in autocommit one transaction, instead
of a BEGIN, a statement per table and a COMMIT.

Nothing here does I/O: :func:`postgres_statement` returns the statement, which the store runs in
the database thread (``agents.engine.store``) or the journal on the event loop
(``agents.engine.loop_writes``). The text depends only on the batch's shape (tables, columns, the
guard's kind), never on its values, so a prepared statement serves every step of a run.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from agents.engine import jsonsafe
from agents.models import Run, RunStatus


class LeaseLost(Exception):
    """Another process took this run over (our lease expired) or it was cancelled under us."""


@dataclass(frozen=True, slots=True)
class Rows:
    """Rows to insert into one table. Values of ``json_columns`` are JSON values (not text)."""

    table: str
    columns: tuple[str, ...]
    values: list[tuple[Any, ...]]
    json_columns: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Change:
    """``UPDATE table SET <assignments> WHERE <where>``; ``params`` fill both, in that order.
    ``{json}`` in ``assignments`` stands for a JSON-typed placeholder."""

    table: str
    assignments: str
    where: str
    params: list[Any]


@dataclass(frozen=True, slots=True)
class Guard:
    """The condition a batch is written under: the run is still ``running``, held by ``owner``
    and not cancelled. With a ``checkpoint``, the same statement stores it; with an ``ending``
    (columns of the run and their values: ``agents.engine.store.run_ending``) it sets them too,
    in the same update of the run's row. ``cancelled_ok`` drops the last condition: the write
    that ends a cancelled run is made by the holder that saw it."""

    run_id: int
    owner: str
    checkpoint: dict[str, Any] | None = None
    cancelled_ok: bool = False
    ending: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class QueuedEvent:
    """An event numbered by the engine, stored by its next write and pushed after it."""

    seq: int
    type: str
    payload: dict[str, Any]


Write = Rows | Change
RUN_HELD = "id = %s AND lease_owner = %s AND status = %s AND NOT cancel_requested"
RUN_HELD_CANCELLED_OK = "id = %s AND lease_owner = %s AND status = %s"
RUN_TABLE = f'"{Run._meta.db_table}"'


def guard_params(guard: Guard) -> list[Any]:
    return [guard.run_id, guard.owner, RunStatus.RUNNING.value]


def held_condition(guard: Guard) -> str:
    return RUN_HELD_CANCELLED_OK if guard.cancelled_ok else RUN_HELD


def lease_lost(guard: Guard) -> LeaseLost:
    return LeaseLost(f"run {guard.run_id} is no longer held by {guard.owner} or was cancelled")


def non_empty(writes: list[Write] | tuple[Write, ...]) -> list[Write]:
    """``writes`` without inserts of no rows (nothing to write)."""
    return [w for w in writes if not (isinstance(w, Rows) and not w.values)]


def _quote(name: str) -> str:
    # PostgreSQL's quoting of the identifiers here: our own table and column names.
    return f'"{name}"'


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value


#: The first part of a statement whose commit need not wait for the disk: ``SET LOCAL`` as a
#: function, so the statement stays one (and can be prepared). A transaction's commit reads
#: ``synchronous_commit`` as the transaction left it, and a statement run alone is a
#: transaction of its own.
COMMIT_WITHOUT_WAITING = "commit_async AS (SELECT set_config('synchronous_commit', 'off', true))"


def postgres_statement(
    guard: Guard | None,
    writes: list[Write],
    facts: list[Write] | tuple[Write, ...] = (),
    *,
    durable: bool = True,
) -> tuple[str, list[Any]] | None:
    """All of ``writes`` and ``facts`` as one statement, or ``None`` when there is nothing to
    write. Under a guard every part of ``writes`` is conditioned on the guard's row
    (``EXISTS (SELECT 1 FROM held)``): it writes everything or nothing; ``facts`` are written
    either way. Rows travel as one JSON array per table, typed by ``jsonb_populate_recordset``
    against the table's row type. The statement's one row, one column: under a guard, whether
    the run was held (0 or 1: with 0 nothing but ``facts`` was written), else 1.
    ``durable=False``: run alone (autocommit), its commit does not wait for the disk
    (:mod:`agents.engine.loop_writes` says when that is safe)."""
    parts: list[str] = []
    params: list[Any] = []
    if guard is not None:
        held_sql = held_condition(guard)
        if guard.checkpoint is not None or guard.ending:
            # One update of the run's row: two data-modifying parts of one statement may not
            # both change a row (PostgreSQL applies only one of them).
            assignments = []
            if guard.checkpoint is not None:
                assignments.append("checkpoint = %s::jsonb")
                params.append(jsonsafe.dumps(guard.checkpoint))
            for column, value in (guard.ending or {}).items():
                assignments.append(f"{_quote(column)} = %s")
                params.append(value)
            parts.append(
                f"held AS (UPDATE {RUN_TABLE} SET {', '.join(assignments)} WHERE {held_sql} RETURNING id)"  # noqa: S608
            )
        else:
            parts.append(f"held AS (SELECT id FROM {RUN_TABLE} WHERE {held_sql} FOR UPDATE)")  # noqa: S608
        params.extend(guard_params(guard))
    tagged = [(w, guard is not None) for w in writes] + [(w, False) for w in facts]
    for number, (write, guarded) in enumerate(tagged):
        table = _quote(write.table)
        condition = ""
        if isinstance(write, Rows):
            if guarded:
                condition = " WHERE EXISTS (SELECT 1 FROM held)"
            names = ", ".join(_quote(c) for c in write.columns)
            parts.append(
                f"w{number} AS (INSERT INTO {table} ({names}) SELECT {names} "  # noqa: S608
                f"FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb){condition})"
            )
            rows = [
                {c: _jsonable(v) for c, v in zip(write.columns, row, strict=True)} for row in write.values
            ]
            params.append(jsonsafe.dumps(rows))
        else:
            if guarded:
                condition = " AND EXISTS (SELECT 1 FROM held)"
            assignments = write.assignments.format(json="%s::jsonb")
            parts.append(f"w{number} AS (UPDATE {table} SET {assignments} WHERE {write.where}{condition})")  # noqa: S608
            params.extend(write.params)
    if not parts:
        return None
    tail = "SELECT count(*) FROM held" if guard is not None else "SELECT 1"
    return assemble(parts, tail, durable=durable), params


def assemble(parts: list[str], tail: str, *, durable: bool = True) -> str:
    """``WITH <parts> <tail>``; ``durable=False`` adds :data:`COMMIT_WITHOUT_WAITING`."""
    if not durable:
        # A CTE is evaluated only when read: the one row read here sets the commit's mode.
        parts, tail = [COMMIT_WITHOUT_WAITING, *parts], f"SELECT ({tail}) FROM commit_async"  # noqa: S608
    return f"WITH {', '.join(parts)} {tail}" if parts else tail  # our own parts: no values in them
