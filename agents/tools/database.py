"""Database connectors as tools: ``<slug>__sql_query`` (read) and ``<slug>__sql_execute`` (write).

The connector's encrypted ``secrets`` name the database::

    {"dsn": "postgres://app:…@db/shop", "read_dsn": "postgres://reader:…@db/shop"}

``dsn`` is ``postgres://…`` / ``postgresql://…`` (psycopg 3) or ``sqlite:///path`` (the standard
library; ``sqlite:////abs/path`` for an absolute path, as in ``DATABASE_URL``). The optional
``read_dsn`` is what ``sql_query`` connects with: point it at a role that may only read (``GRANT
SELECT`` and nothing else), so that the database itself, not only this module, stands between the
model and a write. Without it ``sql_query`` uses ``dsn``. Both drivers are synchronous and run in
``asyncio.to_thread`` with a connection per call, so a tool can run in any event loop and holds no
connection between calls.

Contracts:

* ``sql_query`` runs exactly one read statement. Layers, each enough on its own for the payloads
  it is meant for:

  1. the text is parsed (sqlglot, in the database's dialect, :mod:`agents.tools.sql_guard`): one
     ``SELECT`` / set operation with no write anywhere in its tree and no call to a function off the
     dialect's list of reads (``pg_read_file``, ``pg_create_physical_replication_slot``, ``lo_import``,
     ``dblink``, ``set_config``, ``load_extension`` … act outside the read-only transaction), or it
     is refused, naming ``sql_execute`` (and, for a function, the function); text the parser cannot
     read is refused the same way;
  2. exactly one statement reaches the server whatever the text holds: PostgreSQL through the
     extended query protocol (psycopg's pipeline mode: the server itself refuses "multiple
     commands"), SQLite through ``execute``, which refuses a second statement;
  3. the statement runs in a read-only transaction that cannot be ended from inside: PostgreSQL
     ``BEGIN READ ONLY`` on a session opened with ``default_transaction_read_only=on`` (libpq
     ``options``), so even a smuggled ``COMMIT`` would leave the next transaction read-only;
     SQLite opened with ``mode=ro`` and ``PRAGMA query_only``;
  4. ``read_dsn``'s role, when the operator configured one.

  It returns ``{"columns": [...], "rows": [{column: value}, ...], "truncated": bool}`` with at most
  :data:`MAX_ROWS` rows; values are made JSON-safe (dates in ISO 8601, decimals as numbers when
  exact, else strings, bytes in hex).
* ``sql_execute`` runs exactly one statement (the text must not hold two, and the drivers send one)
  and commits it; it returns ``{"rowcount": n}`` (``None`` when the database does not count rows,
  e.g. for DDL). It is a write: it always requires confirmation and is blocked in a read-only
  organisation.
* ``params`` are positional: ``?`` placeholders for SQLite, ``%s`` for PostgreSQL (where a literal
  ``%`` must then be written ``%%``, as psycopg expects; without params the SQL is sent as written).
* A refused statement, an SQL error, an unusable DSN or the connector's timeout raise
  :class:`ToolError` carrying the database's own message, with every credential masked
  (:mod:`agents.tools.redaction`): no password, DSN or database path ever reaches the model, the run's
  events or the audit trail.
"""

from __future__ import annotations

import abc
import asyncio
import datetime as dt
import math
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from agents.models import Connector
from agents.tools.base import Tool, ToolError, ToolSpec
from agents.tools.redaction import dsn_secrets, redact_credentials
from agents.tools.sql_guard import Dialect, classify_sql, count_statements

if TYPE_CHECKING:
    import psycopg

MAX_ROWS = 200
MAX_SQL_CHARS = 20_000
"""Longer SQL is refused before it is parsed: parsing costs time in proportion to the text."""
Work = Literal["query", "execute"]
POSTGRES_SCHEMES = ("postgres://", "postgresql://")
SQLITE_PREFIX = "sqlite:///"
DIALECTS: dict[str, Dialect] = {"postgresql": "postgres", "sqlite": "sqlite"}


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


def _secret_text(secrets: dict[str, Any], key: str) -> str:
    value = secrets.get(key)
    return value if isinstance(value, str) else ""


class _DatabaseTool(Tool, abc.ABC):
    suffix: str
    work: Work
    # What the tool's spec says: its title's verb ("Read", "Change"), how its description starts,
    # what one call does (``{placeholder}`` filled in), and whether it writes (then a person
    # confirms each call).
    verb: str
    lead: str
    what: str
    writes: bool

    def __init__(self, *, connector: Connector) -> None:
        secrets = connector.secrets if isinstance(connector.secrets, dict) else {}
        # Copied at build time: run() must not touch the ORM (it runs in an event loop).
        self._dsn = self._dsn_of(secrets)
        # Every DSN of the connector, so that an error from either never shows a password.
        self._secrets = [
            secret for key in ("dsn", "read_dsn") for secret in dsn_secrets(_secret_text(secrets, key))
        ]
        self.timeout = float(connector.timeout_seconds)
        self.engine = _engine_of(self._dsn)
        self.connector_name = connector.name
        placeholder = "%s" if self.engine == "postgresql" else "?"
        self.spec = ToolSpec(
            name=f"{connector.slug}__{self.suffix}",
            description=f"{self.lead} the {connector.name} database ({self.engine or 'SQL'}): "
            + self.what.format(placeholder=placeholder),
            parameters=_parameters_schema(placeholder),
            requires_confirmation=self.writes,
            is_write=self.writes,
            title=f"{self.verb} the {connector.name} database",
        )

    def __repr__(self) -> str:
        # The DSN may carry a password: never in a repr.
        return f"<{type(self).__name__} {self.name} ({self.engine or 'unknown engine'})>"

    @staticmethod
    def _dsn_of(secrets: dict[str, Any]) -> str:
        return _secret_text(secrets, "dsn")

    @abc.abstractmethod
    def _check(self, sql: str, dialect: Dialect) -> None:
        """Raise :class:`ToolError` when ``sql`` may not run through this tool."""

    async def run(self, args: dict[str, Any]) -> Any:
        try:
            return await self._run(str(args.get("sql") or ""), args.get("params"))
        except ToolError as exc:
            # The drivers' messages may quote the DSN (a malformed one verbatim): mask it here,
            # once, whatever raised.
            raise ToolError(redact_credentials(str(exc), secrets=self._secrets)) from None

    async def _run(self, sql: str, params: Any) -> Any:
        driver = DRIVERS.get(self.engine)
        if driver is None:
            raise ToolError(
                f"the connector {self.connector_name!r} has no usable DSN "
                "(expected postgres://… or sqlite:///path in its secrets)"
            )
        if not sql.strip():
            raise ToolError("the SQL is empty")
        if len(sql) > MAX_SQL_CHARS:
            raise ToolError(f"the SQL is longer than {MAX_SQL_CHARS} characters; send a shorter statement")
        values = _positional(params)
        # In the worker thread too: parsing is CPU work the event loop must not wait on.
        await asyncio.to_thread(self._check, sql, DIALECTS[self.engine])
        return await asyncio.to_thread(driver, self._dsn, sql, values, self.work, self.timeout)


class SqlQueryTool(_DatabaseTool):
    suffix = "sql_query"
    work: Work = "query"
    verb, lead, writes = "Read", "Read from", False
    what = (
        "one SELECT (WITH, UNION … allowed) statement, run read-only; returns at most "
        f"{MAX_ROWS} rows as objects. Use {{placeholder}} placeholders with params for values."
    )
    reads_only = True  # one read statement, in a read-only transaction

    @staticmethod
    def _dsn_of(secrets: dict[str, Any]) -> str:
        return _secret_text(secrets, "read_dsn") or _secret_text(secrets, "dsn")

    def _check(self, sql: str, dialect: Dialect) -> None:
        verdict = classify_sql(sql, dialect=dialect)
        if verdict.is_read:
            return
        if verdict.statements == 0:
            raise ToolError("the SQL holds no statement")
        writer = self.name.removesuffix("sql_query") + "sql_execute"
        if verdict.function is not None:
            raise ToolError(
                f"{self.name} may only call functions a read needs, and {verdict.function}() is not one "
                f"of them (it may act outside the read-only transaction or reach the server); send such a "
                f"call through {writer}, which a person confirms, or ask the database's operator"
            )
        raise ToolError(
            f"{self.name} only runs a single SELECT statement, read-only (got {verdict.write}); "
            f"changes go through {writer}"
        )


class SqlExecuteTool(_DatabaseTool):
    suffix = "sql_execute"
    work: Work = "execute"
    verb, lead, writes = "Change", "Change", True
    what = (
        "one INSERT, UPDATE, DELETE or DDL statement, committed once a person confirms it; returns "
        "the row count. Use {placeholder} placeholders with params for values."
    )

    def _check(self, sql: str, dialect: Dialect) -> None:
        # Text the parser cannot read may still be one statement of the database's dialect: it is
        # sent (a person approved it), and the driver refuses it if it holds more than one.
        statements = count_statements(sql, dialect=dialect)
        if statements == 0:
            raise ToolError("the SQL holds no statement")
        if statements is not None and statements > 1:
            raise ToolError(f"send one SQL statement at a time (got {statements})")


# --- arguments ------------------------------------------------------------------------------------


def _engine_of(dsn: str) -> str:
    if dsn.startswith(POSTGRES_SCHEMES):
        return "postgresql"
    if dsn.startswith(SQLITE_PREFIX) and len(dsn) > len(SQLITE_PREFIX):
        return "sqlite"
    return ""


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


def _finish(connection: Any, cursor: Any, work: Work) -> Any:
    """What the statement ``cursor`` ran gives the model (either driver): a query's rows, its
    transaction rolled back (it changed nothing); or a write's row count, committed."""
    if work == "query":
        if cursor.description is None:
            raise ToolError("the statement returned no rows to read")
        result = _rows_result(cursor.description, cursor.fetchmany(MAX_ROWS + 1))
        connection.rollback()
        return result
    rowcount = cursor.rowcount
    connection.commit()
    return {"rowcount": rowcount if rowcount >= 0 else None}


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
        # Not the path: where the server keeps its files is nobody's business but the operator's.
        raise ToolError(f"SQLite error: {exc} (check the connector's DSN)") from None
    try:
        if work == "query":
            # Also covers databases a statement might attach: mode=ro holds for the main one only.
            connection.execute("PRAGMA query_only = ON")
        # Interrupts a statement still running at the deadline (SQLite has no statement timeout).
        connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        # execute() runs one statement and refuses text holding a second one.
        return _finish(connection, connection.execute(sql, params), work)
    except sqlite3.Error as exc:
        connection.rollback()
        if "interrupted" in str(exc) and time.monotonic() > deadline:
            raise ToolError(f"the query ran longer than {timeout:g}s and was stopped") from None
        raise ToolError(f"SQLite error: {exc}") from None
    finally:
        connection.close()


def _run_postgres(dsn: str, sql: str, params: Sequence[Any], work: Work, timeout: float) -> Any:
    import psycopg  # imported here: only deployments with database connectors pay for it

    connection = postgres_connect(dsn, work=work, timeout=timeout)
    try:
        with connection.cursor() as cursor:
            # Pipeline mode sends the statement through the extended query protocol even without
            # params, so the server refuses a text holding several statements instead of running
            # them in turn. None rather than () without params: psycopg then leaves a literal % alone.
            with connection.pipeline():
                cursor.execute(sql, params or None)
            return _finish(connection, cursor, work)
    except psycopg.Error as exc:
        raise ToolError(f"PostgreSQL error: {_pg_message(exc)}") from None
    finally:
        connection.close()  # closing without commit rolls back whatever is left


def postgres_connect(dsn: str, *, work: Work, timeout: float) -> psycopg.Connection[Any]:
    """A new psycopg connection for one call (the caller closes it), in a transaction not begun yet.

    Both kinds of session carry a ``statement_timeout`` of ``timeout``; a ``query`` session is
    read-only twice: its transactions begin ``READ ONLY`` and the session's
    ``default_transaction_read_only`` is on, set by the server at start-up through libpq ``options``
    (added to the DSN's own), so no statement can end the read-only state for the next transaction.
    Raises :class:`ToolError` for a DSN psycopg cannot read or a server it cannot reach.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    if not psycopg.Pipeline.is_supported():
        raise ToolError("PostgreSQL connectors need libpq 14 or later (psycopg pipeline mode)")
    try:
        own_options = conninfo_to_dict(dsn).get("options") or ""
    except psycopg.Error as exc:
        raise ToolError(f"PostgreSQL error: the connector's DSN is not valid: {_pg_message(exc)}") from None
    session = [f"-c statement_timeout={max(1, int(timeout * 1000))}"]
    if work == "query":
        session.append("-c default_transaction_read_only=on")
    try:
        connection = psycopg.connect(
            dsn,
            connect_timeout=max(1, round(timeout)),
            autocommit=False,
            prepare_threshold=None,  # unnamed statements only: fine behind a transaction pooler
            options=" ".join([str(own_options), *session]).strip(),
        )
    except psycopg.Error as exc:
        raise ToolError(f"PostgreSQL error: could not connect: {_pg_message(exc)}") from None
    connection.read_only = work == "query"
    return connection


DRIVERS: dict[str, Callable[[str, str, Sequence[Any], Work, float], Any]] = {
    "sqlite": _run_sqlite,
    "postgresql": _run_postgres,
}
"""``driver(dsn, sql, params, work, timeout)`` by engine: runs one statement as the module says."""


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
