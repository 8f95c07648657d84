"""Database connectors as tools: ``<slug>__sql_query`` (read) and ``<slug>__sql_execute`` (write).

The connector's ``secrets["dsn"]`` names the database: ``postgres://…`` / ``postgresql://…``
(psycopg 3) or ``sqlite:///path`` (the standard library; ``sqlite:////abs/path`` for an absolute
path, as in ``DATABASE_URL``). Both drivers are synchronous and run in ``asyncio.to_thread`` with a
connection per call, so a tool can run in any event loop and holds no connection between calls.

Contracts:

* ``sql_query`` runs exactly one SELECT or WITH statement inside a read-only transaction
  (PostgreSQL ``READ ONLY``; SQLite opened with ``mode=ro``), so a write hidden in a CTE or a
  side-effecting function is refused by the database itself, not only by the keyword check.
  It returns ``{"columns": [...], "rows": [{column: value}, ...], "truncated": bool}`` with at most
  :data:`MAX_ROWS` rows; values are made JSON-safe (dates in ISO 8601, decimals as numbers when
  exact, else strings, bytes in hex).
* ``sql_execute`` runs exactly one statement and commits it; it returns ``{"rowcount": n}``
  (``None`` when the database does not count rows, e.g. for DDL). It is a write that always
  requires confirmation.
* ``params`` are positional: ``?`` placeholders for SQLite, ``%s`` for PostgreSQL.
* A refused statement, an SQL error, an unusable DSN or the connector's timeout raise
  :class:`ToolError` carrying the database's own message.
"""

from __future__ import annotations

import abc
import asyncio
import datetime as dt
import math
import sqlite3
import time
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Literal
from urllib.parse import quote

from agents.models import Connector
from agents.tools.base import Tool, ToolError, ToolSpec

MAX_ROWS = 200
Work = Literal["query", "execute"]
READ_KEYWORDS = frozenset({"select", "with"})
POSTGRES_SCHEMES = ("postgres://", "postgresql://")
SQLITE_PREFIX = "sqlite:///"


def database_tools(connector: Connector) -> list[Tool]:
    """The two tools of a database connector, read first."""
    return [SqlQueryTool(connector=connector), SqlExecuteTool(connector=connector)]


def _parameters_schema(placeholder: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "sql": {"type": "string", "minLength": 1, "description": "One SQL statement."},
            "params": {
                "type": "array",
                "items": {"type": ["string", "number", "integer", "boolean", "null"]},
                "description": f"Positional values for the {placeholder} placeholders, in order.",
            },
        },
        "required": ["sql"],
        "additionalProperties": False,
    }


class _DatabaseTool(Tool, abc.ABC):
    suffix: str

    def __init__(self, *, connector: Connector) -> None:
        secrets = connector.secrets if isinstance(connector.secrets, dict) else {}
        # Copied at build time: run() must not touch the ORM (it runs in an event loop).
        self._dsn = str(secrets.get("dsn") or "")
        self.timeout = float(connector.timeout_seconds)
        self.engine = _engine_of(self._dsn)
        self.connector_name = connector.name
        placeholder = "%s" if self.engine == "postgresql" else "?"
        self.spec = self._spec(f"{connector.slug}__{self.suffix}", connector, placeholder)

    def __repr__(self) -> str:
        # The DSN may carry a password: never in a repr.
        return f"<{type(self).__name__} {self.name} ({self.engine or 'unknown engine'})>"

    @abc.abstractmethod
    def _spec(self, name: str, connector: Connector, placeholder: str) -> ToolSpec: ...

    async def _call(self, sql: str, params: Any, work: Work) -> Any:
        statement = _single_statement(sql)
        values = _positional(params)
        driver = {"sqlite": _run_sqlite, "postgresql": _run_postgres}.get(self.engine)
        if driver is None:
            raise ToolError(
                f"the connector {self.connector_name!r} has no usable DSN "
                "(expected postgres://… or sqlite:///path in its secrets)"
            )
        return await asyncio.to_thread(driver, self._dsn, statement, values, work, self.timeout)


class SqlQueryTool(_DatabaseTool):
    suffix = "sql_query"

    def _spec(self, name: str, connector: Connector, placeholder: str) -> ToolSpec:
        return ToolSpec(
            name=name,
            description=(
                f"Read from the {connector.name} database ({self.engine or 'SQL'}): one SELECT or WITH "
                f"statement, run read-only; returns at most {MAX_ROWS} rows as objects. "
                f"Use {placeholder} placeholders with params for values."
            ),
            parameters=_parameters_schema(placeholder),
            requires_confirmation=False,
            is_write=False,
        )

    async def run(self, args: dict[str, Any]) -> Any:
        sql = str(args.get("sql") or "")
        keyword = _first_keyword(sql)
        if keyword not in READ_KEYWORDS:
            got = keyword.upper() or "nothing"
            writer = self.name.removesuffix("sql_query") + "sql_execute"
            raise ToolError(
                f"{self.name} only runs a single SELECT or WITH statement (got {got}); "
                f"changes go through {writer}"
            )
        return await self._call(sql, args.get("params"), "query")


class SqlExecuteTool(_DatabaseTool):
    suffix = "sql_execute"

    def _spec(self, name: str, connector: Connector, placeholder: str) -> ToolSpec:
        return ToolSpec(
            name=name,
            description=(
                f"Change the {connector.name} database ({self.engine or 'SQL'}): one INSERT, UPDATE, "
                f"DELETE or DDL statement, committed once a person confirms it; returns the row count. "
                f"Use {placeholder} placeholders with params for values."
            ),
            parameters=_parameters_schema(placeholder),
            requires_confirmation=True,
            is_write=True,
        )

    async def run(self, args: dict[str, Any]) -> Any:
        return await self._call(str(args.get("sql") or ""), args.get("params"), "execute")


# --- statement checks -----------------------------------------------------------------------------


def _engine_of(dsn: str) -> str:
    if dsn.startswith(POSTGRES_SCHEMES):
        return "postgresql"
    if dsn.startswith(SQLITE_PREFIX) and len(dsn) > len(SQLITE_PREFIX):
        return "sqlite"
    return ""


def _code_spans(sql: str) -> list[str]:
    """``sql`` split at top-level semicolons, with comments removed and literals kept intact.

    Knows '…' strings (with ''), "…" identifiers, -- and /* */ comments and PostgreSQL $tag$
    strings: enough to tell one statement from two, which is all it is used for.
    """
    statements: list[str] = []
    current: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        char = sql[i]
        if char in "'\"":
            end = i + 1
            while end < n:
                if sql[end] == char:
                    if end + 1 < n and sql[end + 1] == char:  # doubled quote inside the literal
                        end += 2
                        continue
                    break
                end += 1
            current.append(sql[i : end + 1])
            i = end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            current.append(" ")
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            current.append(" ")
        elif char == "$" and (tag_end := sql.find("$", i + 1)) > 0 and sql[i + 1 : tag_end].isidentifier():
            tag = sql[i : tag_end + 1]
            end = sql.find(tag, tag_end + 1)
            stop = n if end < 0 else end + len(tag)
            current.append(sql[i:stop])
            i = stop
        elif char == "$" and sql.startswith("$$", i):
            end = sql.find("$$", i + 2)
            stop = n if end < 0 else end + 2
            current.append(sql[i:stop])
            i = stop
        elif char == ";":
            statements.append("".join(current))
            current = []
            i += 1
        else:
            current.append(char)
            i += 1
    statements.append("".join(current))
    return [statement for statement in statements if statement.strip()]


def _single_statement(sql: str) -> str:
    statements = _code_spans(sql)
    if not statements:
        raise ToolError("the SQL is empty")
    if len(statements) > 1:
        raise ToolError(f"send one SQL statement at a time (got {len(statements)})")
    return statements[0].strip()


def _first_keyword(sql: str) -> str:
    statements = _code_spans(sql)
    if not statements:
        return ""
    text = statements[0].lstrip(" \t\r\n(")
    word = []
    for char in text:
        if not (char.isalnum() or char == "_"):
            break
        word.append(char)
    return "".join(word).lower()


def _positional(params: Any) -> tuple[Any, ...]:
    if params is None:
        return ()
    if not isinstance(params, list | tuple):
        raise ToolError("params must be a list of values")
    for value in params:
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ToolError("params may only hold strings, numbers, booleans and null")
    return tuple(params)


# --- drivers --------------------------------------------------------------------------------------


def _run_sqlite(dsn: str, sql: str, params: Sequence[Any], work: Work, timeout: float) -> Any:
    path = dsn[len(SQLITE_PREFIX) :]
    # A URI so the read connection is mode=ro (the engine refuses every write) and neither mode
    # creates a missing file: a typo in the DSN must fail, not start an empty database.
    mode = "ro" if work == "query" else "rw"
    uri = f"file:{quote(path)}?mode={mode}"
    deadline = time.monotonic() + timeout
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level="DEFERRED")
    except sqlite3.Error as exc:
        raise ToolError(f"SQLite error: {exc} ({path})") from None
    try:
        # Interrupts a statement still running at the deadline (SQLite has no statement timeout).
        connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        cursor = connection.execute(sql, params)
        if work == "query":
            result = _rows_result(cursor.description, cursor.fetchmany(MAX_ROWS + 1))
            connection.rollback()
            return result
        rowcount = cursor.rowcount
        connection.commit()
        return {"rowcount": rowcount if rowcount >= 0 else None}
    except sqlite3.Error as exc:
        connection.rollback()
        if "interrupted" in str(exc) and time.monotonic() > deadline:
            raise ToolError(f"the query ran longer than {timeout:g}s and was stopped") from None
        raise ToolError(f"SQLite error: {exc}") from None
    finally:
        connection.close()


def _run_postgres(dsn: str, sql: str, params: Sequence[Any], work: Work, timeout: float) -> Any:
    import psycopg  # imported here: only deployments with database connectors pay for it

    try:
        connection = psycopg.connect(dsn, connect_timeout=max(1, round(timeout)), autocommit=False)
    except psycopg.Error as exc:
        raise ToolError(f"PostgreSQL error: could not connect: {_pg_message(exc)}") from None
    try:
        # READ ONLY applies to the transaction psycopg begins with the first statement below.
        connection.read_only = work == "query"
        with connection.cursor() as cursor:
            # Local to this transaction, so the server cancels a statement over the budget.
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", (f"{int(timeout * 1000)}ms",))
            # None rather than () without params: psycopg then leaves a literal % alone.
            cursor.execute(sql, params or None)
            if work == "query":
                if cursor.description is None:
                    raise ToolError("the statement returned no rows to read")
                result = _rows_result(cursor.description, cursor.fetchmany(MAX_ROWS + 1))
                connection.rollback()
                return result
            rowcount = cursor.rowcount
        connection.commit()
        return {"rowcount": rowcount if rowcount >= 0 else None}
    except psycopg.Error as exc:
        raise ToolError(f"PostgreSQL error: {_pg_message(exc)}") from None
    finally:
        connection.close()  # closing without commit rolls back whatever is left


def _pg_message(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _rows_result(description: Any, fetched: list[Sequence[Any]]) -> dict[str, Any]:
    columns = [column[0] for column in description or ()]
    rows = [dict(zip(columns, (_jsonable(value) for value in row), strict=False)) for row in fetched]
    return {"columns": columns, "rows": rows[:MAX_ROWS], "truncated": len(rows) > MAX_ROWS}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Decimal):
        # A number when float keeps it exactly (12.5), a string when it would not (money, big ints).
        as_float = float(value)
        exact = math.isfinite(as_float) and Decimal(repr(as_float)) == value
        return as_float if exact else str(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, uuid.UUID | dt.timedelta):
        return str(value)
    return str(value)
