"""The SQL tools against real databases, as an attacker would use them.

Every test that can runs twice: on a temporary SQLite file and on PostgreSQL (a scratch schema of the
test database, created and committed by the fixture, dropped afterwards; marked ``postgres``). A
refused statement is checked twice: the tool says no, and the table is exactly as it was.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError

from agents import events as ev
from agents.engine.runner import run_execute
from agents.models import Connector, Run, RunEvent, RunMessage, RunStatus, ToolExecution
from agents.services import run_start
from agents.tools.base import Tool, ToolError
from agents.tools.database import DRIVERS, database_tools, postgres_connect
from approvals.models import ConfirmationRequest, ConfirmationStatus
from tests.agents.engine_kit import events_of
from tests.approvals.kit import set_policy
from tests.personas import Personas, make_action, make_agent, make_database_connector, scripted

PURCHASES = [("PO-1", "Lumen", "pending"), ("PO-2", "Northwind", "pending"), ("PO-3", "Bolt", "paid")]


@dataclass
class Ledger:
    """A purchases table in a real database, and what the tools need to reach it."""

    engine: str  # "sqlite" | "postgresql", as the tools name it
    dsn: str
    snapshot: Callable[[], Any]  # every row of purchases, and the tables that exist
    read_dsn: str = ""  # postgres: a role that may only SELECT

    def tools(self, personas: Personas, **fields: Any) -> dict[str, Tool]:
        connector = make_database_connector(personas.org, self.dsn, **fields)
        return {tool.name: tool for tool in database_tools(connector)}

    def query(self, personas: Personas) -> Tool:
        return self.tools(personas)["ledger__sql_query"]

    def execute(self, personas: Personas) -> Tool:
        return self.tools(personas)["ledger__sql_execute"]


def call(tool: Tool, args: dict[str, Any]) -> Any:
    return asyncio.run(tool.run(args))


def _sqlite_ledger(tmp_path: Path) -> Iterator[Ledger]:
    path = tmp_path / "ledger.sqlite3"
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("CREATE TABLE purchases (id TEXT PRIMARY KEY, vendor TEXT, status TEXT)")
        connection.executemany("INSERT INTO purchases VALUES (?, ?, ?)", PURCHASES)
    connection.close()

    def snapshot() -> Any:
        reader = sqlite3.connect(path)
        try:
            rows = reader.execute("SELECT id, vendor, status FROM purchases ORDER BY id").fetchall()
            tables = reader.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
            return rows, tables
        finally:
            reader.close()

    yield Ledger(engine="sqlite", dsn=f"sqlite:///{path}", snapshot=snapshot)


def _postgres_ledger() -> Iterator[Ledger]:
    import psycopg
    from django.db import connection as django_connection

    settings = django_connection.settings_dict
    schema = f"ledger_{uuid.uuid4().hex[:10]}"
    reader = f"{schema}_reader"
    password = quote(settings["PASSWORD"] or "", safe="")
    where = f"{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"
    search_path = f"?options=-csearch_path%3D{schema}"  # the DSN's own options, kept by the tools
    dsn = f"postgres://{settings['USER']}:{password}@{where}{search_path}"
    admin = psycopg.connect(dsn, autocommit=True)
    admin.execute(f"CREATE SCHEMA {schema}")
    admin.execute("CREATE TABLE purchases (id text PRIMARY KEY, vendor text, status text)")
    with admin.cursor() as cursor:
        cursor.executemany("INSERT INTO purchases VALUES (%s, %s, %s)", PURCHASES)
    # A procedure that writes: what CALL would run if the read tool let it through.
    admin.execute("CREATE PROCEDURE wipe() LANGUAGE sql AS $$ DELETE FROM purchases $$")
    admin.execute(f"CREATE ROLE {reader} LOGIN PASSWORD 'reader-pass'")
    admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {reader}")
    admin.execute(f"GRANT SELECT ON purchases TO {reader}")

    def snapshot() -> Any:
        rows = admin.execute("SELECT id, vendor, status FROM purchases ORDER BY id").fetchall()
        tables = admin.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", (schema,)
        ).fetchall()
        return rows, tables

    try:
        yield Ledger(
            engine="postgresql",
            dsn=dsn,
            snapshot=snapshot,
            read_dsn=f"postgres://{reader}:reader-pass@{where}{search_path}",
        )
    finally:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.execute(f"DROP ROLE {reader}")
        admin.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger(request: pytest.FixtureRequest, personas: Personas, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        yield from _sqlite_ledger(tmp_path)
    else:
        yield from _postgres_ledger()


@pytest.fixture
def pg_ledger(personas: Personas) -> Iterator[Ledger]:
    """The PostgreSQL ledger alone, for what only PostgreSQL has (sessions, roles)."""
    yield from _postgres_ledger()


# Every one of these ran (or would run) a write through a naive read tool. Both engines get every
# payload: a dialect's own trick is refused by the other as unreadable text, which is also a refusal.
DISGUISED_WRITES = {
    "an E-string hiding a stacked COMMIT and DELETE": (
        "SELECT E'\\''; COMMIT; DELETE FROM purchases WHERE id='PO-1'; SELECT 'x'"
    ),
    "dollar-quote look-alikes hiding a stacked COMMIT and DELETE": (
        "SELECT 1 AS a$x$; COMMIT; DELETE FROM purchases WHERE id='PO-1'; SELECT 1 AS b$x$"
    ),
    "a doubled quote before a stacked COMMIT and DELETE": (
        "SELECT 'it''s'; COMMIT; DELETE FROM purchases WHERE id='PO-1'; SELECT 'x'"
    ),
    "a plain DELETE": "DELETE FROM purchases",
    "a DELETE behind a CTE": "WITH doomed AS (SELECT 1) DELETE FROM purchases",
    "a DELETE inside a CTE": "WITH d AS (DELETE FROM purchases RETURNING *) SELECT * FROM d",
    "an UPDATE inside a CTE": "WITH d AS (UPDATE purchases SET status = 'void' RETURNING id) SELECT * FROM d",
    "an INSERT inside a CTE": (
        "WITH d AS (INSERT INTO purchases VALUES ('PO-9', 'Evil', 'paid') RETURNING id) SELECT * FROM d"
    ),
    "SELECT INTO": "SELECT * INTO stolen FROM purchases",
    "COPY": "COPY purchases TO STDOUT",
    "COPY of a DELETE": "COPY (DELETE FROM purchases RETURNING *) TO STDOUT",
    "CALL": "CALL wipe()",
    "DO": "DO $$ BEGIN DELETE FROM purchases; END $$",
    "stacked statements": "SELECT 1; DELETE FROM purchases",
    "a block comment hiding the semicolon": "SELECT 1 /* ; */; DELETE FROM purchases",
    "a line comment hiding the semicolon": "SELECT 1 -- ;\n; DELETE FROM purchases",
    "a dollar-quoted semicolon": "SELECT $$;$$; DELETE FROM purchases",
    "a tagged dollar quote holding a quote": "SELECT $q$ ' $q$; DELETE FROM purchases",
    "a lone COMMIT": "COMMIT",
    "BEGIN": "BEGIN",
    "SET": "SET default_transaction_read_only = off",
    "set_config": "SELECT set_config('default_transaction_read_only', 'off', false)",
    "EXPLAIN ANALYZE": "EXPLAIN ANALYZE DELETE FROM purchases",
    "SELECT FOR UPDATE": "SELECT * FROM purchases FOR UPDATE",
    "TRUNCATE": "TRUNCATE purchases",
    "DROP": "DROP TABLE purchases",
    "PRAGMA": "PRAGMA writable_schema = 1",
    "ATTACH": "ATTACH DATABASE 'other.sqlite3' AS other",
}


@pytest.mark.parametrize("sql", DISGUISED_WRITES.values(), ids=DISGUISED_WRITES.keys())
def test_it_refuses_every_disguised_write_in_sql_query_and_the_table_is_unchanged(
    ledger: Ledger, personas: Personas, sql: str
) -> None:
    before = ledger.snapshot()
    with pytest.raises(ToolError) as refused:
        call(ledger.query(personas), {"sql": sql})
    assert "through ledger__sql_execute" in str(refused.value), str(refused.value)
    assert ledger.snapshot() == before


def test_it_refuses_sql_too_deep_or_too_long_to_parse_without_crashing(
    ledger: Ledger, personas: Personas
) -> None:
    query = ledger.query(personas)
    with pytest.raises(ToolError, match=r"\(got SQL nested too deeply to be parsed\)"):
        call(query, {"sql": "SELECT " + "(" * 5000 + "1" + ")" * 5000})
    with pytest.raises(ToolError, match=r"^the SQL is longer than 20000 characters"):
        call(query, {"sql": "SELECT 1 AS x" + " " * 20_000})


STACKED = {
    name: DISGUISED_WRITES[name]
    for name in (
        "an E-string hiding a stacked COMMIT and DELETE",
        "dollar-quote look-alikes hiding a stacked COMMIT and DELETE",
        "a doubled quote before a stacked COMMIT and DELETE",
        "stacked statements",
        "a block comment hiding the semicolon",
        "a line comment hiding the semicolon",
        "a dollar-quoted semicolon",
    )
}


@pytest.mark.parametrize("work", ["query", "execute"])
@pytest.mark.parametrize("sql", STACKED.values(), ids=STACKED.keys())
def test_it_refuses_stacked_statements_at_the_driver_even_past_the_parser(
    ledger: Ledger, sql: str, work: str
) -> None:
    """The server (PostgreSQL's extended protocol) or sqlite3's execute refuses a second
    statement: the one-statement rule does not rest on the parser alone."""
    before = ledger.snapshot()
    with pytest.raises(ToolError):
        DRIVERS[ledger.engine](ledger.dsn, sql, (), work, 5.0)
    assert ledger.snapshot() == before


def test_it_refuses_a_write_in_a_read_at_the_database_even_past_the_parser(ledger: Ledger) -> None:
    before = ledger.snapshot()
    sql = "DELETE FROM purchases" if ledger.engine == "sqlite" else DISGUISED_WRITES["a DELETE inside a CTE"]
    with pytest.raises(ToolError, match=r"read-only transaction|readonly database"):
        DRIVERS[ledger.engine](ledger.dsn, sql, (), "query", 5.0)
    assert ledger.snapshot() == before


@pytest.mark.postgres
def test_it_keeps_a_read_session_read_only_after_a_smuggled_commit(pg_ledger: Ledger) -> None:
    """The read session's default is read-only: ending the read-only transaction (COMMIT) and
    writing outside any explicit transaction still fails."""
    import psycopg

    before = pg_ledger.snapshot()
    connection = postgres_connect(pg_ledger.dsn, work="query", timeout=5.0)
    try:
        connection.execute("SELECT 1")
        connection.execute("COMMIT")
        connection.autocommit = True  # no BEGIN READ ONLY from psycopg any more: the session decides
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            connection.execute("DELETE FROM purchases")
    finally:
        connection.close()
    assert pg_ledger.snapshot() == before


@pytest.mark.postgres
def test_a_read_runs_in_a_read_only_transaction_of_a_read_only_session(
    pg_ledger: Ledger, personas: Personas
) -> None:
    # The pg_settings view, not current_setting(): a read may not call that function.
    sql = (
        "SELECT name, setting FROM pg_settings WHERE name IN "
        "('transaction_read_only', 'default_transaction_read_only', 'statement_timeout') ORDER BY name"
    )
    result = call(pg_ledger.tools(personas, timeout_seconds=4.0)["ledger__sql_query"], {"sql": sql})
    assert result["rows"] == [
        {"name": "default_transaction_read_only", "setting": "on"},
        {"name": "statement_timeout", "setting": "4000"},
        {"name": "transaction_read_only", "setting": "on"},
    ]


@pytest.mark.postgres
def test_a_postgres_statement_running_past_the_connectors_timeout_is_cancelled(
    pg_ledger: Ledger, personas: Personas
) -> None:
    tools = pg_ledger.tools(personas, timeout_seconds=0.5)
    began = time.monotonic()
    for tool, sql in [
        # Counting ten billion rows, one by one: a read that may run (pg_sleep may not).
        (tools["ledger__sql_query"], "SELECT count(*) FROM (SELECT generate_series(1, 10000000000)) AS s"),
        (tools["ledger__sql_execute"], "UPDATE purchases SET status = 'void' WHERE pg_sleep(5) IS NOT NULL"),
    ]:
        with pytest.raises(ToolError, match="canceling statement due to statement timeout"):
            call(tool, {"sql": sql})
    assert time.monotonic() - began < 4
    assert pg_ledger.snapshot()[0] == PURCHASES


def test_sql_query_connects_with_the_read_dsn_when_the_connector_has_one(
    ledger: Ledger, personas: Personas, tmp_path: Path
) -> None:
    if ledger.engine == "sqlite":
        replica = tmp_path / "replica.sqlite3"
        with sqlite3.connect(replica) as connection:
            connection.execute("CREATE TABLE purchases (id TEXT, vendor TEXT, status TEXT)")
            connection.execute("INSERT INTO purchases VALUES ('R-1', 'Replica', 'paid')")
        connection.close()
        read_dsn, sql, expected = f"sqlite:///{replica}", "SELECT id FROM purchases", [{"id": "R-1"}]
    else:
        read_dsn, sql = ledger.read_dsn, "SELECT current_user AS who"
        expected = [{"who": ledger.read_dsn.split("//")[1].split(":")[0]}]
    tools = ledger.tools(personas, read_dsn=read_dsn)
    assert call(tools["ledger__sql_query"], {"sql": sql})["rows"] == expected
    # The write tool keeps the main DSN.
    assert call(tools["ledger__sql_execute"], {"sql": "DELETE FROM purchases WHERE id = 'PO-3'"}) == {
        "rowcount": 1
    }
    assert [row[0] for row in ledger.snapshot()[0]] == ["PO-1", "PO-2"]


@pytest.mark.postgres
def test_a_read_only_role_refuses_a_write_even_past_every_other_layer(pg_ledger: Ledger) -> None:
    import psycopg

    before = pg_ledger.snapshot()
    connection = psycopg.connect(pg_ledger.read_dsn, autocommit=True)
    try:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            connection.execute("DELETE FROM purchases")
    finally:
        connection.close()
    assert pg_ledger.snapshot() == before


def legitimate_reads(engine: str) -> dict[str, tuple[str, list[Any] | None, list[dict[str, Any]]]]:
    mark = "%s" if engine == "postgresql" else "?"
    reads = {
        "a CTE": (
            "WITH pending AS (SELECT id FROM purchases WHERE status = 'pending') "
            "SELECT count(*) AS n FROM pending",
            None,
            [{"n": 2}],
        ),
        "a UNION": (
            "SELECT id FROM purchases WHERE id = 'PO-1' UNION SELECT id FROM purchases WHERE id = 'PO-3' "
            "ORDER BY id",
            None,
            [{"id": "PO-1"}, {"id": "PO-3"}],
        ),
        "a literal % and ; in strings": (
            "SELECT '100%; DELETE FROM purchases' AS s, 'it''s' AS t /* ; */ -- ;\n;",
            None,
            [{"s": "100%; DELETE FROM purchases", "t": "it's"}],
        ),
        "params": (
            "SELECT id FROM purchases WHERE status = ? AND vendor <> ? ORDER BY id".replace("?", mark),
            ["pending", "Lumen"],
            [{"id": "PO-2"}],
        ),
    }
    if engine == "postgresql":
        reads |= {
            "a parenthesised read": ("(SELECT count(*) AS n FROM purchases)", None, [{"n": 3}]),
            "a dollar-quoted string holding ;": ("SELECT $q$a;b ' c$q$ AS s", None, [{"s": "a;b ' c"}]),
            "an E-string": ("SELECT E'it\\'s; x' AS s", None, [{"s": "it's; x"}]),
            "params and a literal %%": (
                "SELECT id, '100%%' AS pct FROM purchases WHERE id = %s",
                ["PO-3"],
                [{"id": "PO-3", "pct": "100%"}],
            ),
        }
    return reads


def test_legitimate_reads_still_work(ledger: Ledger, personas: Personas) -> None:
    query = ledger.query(personas)
    for name, (sql, params, rows) in legitimate_reads(ledger.engine).items():
        args: dict[str, Any] = {"sql": sql} if params is None else {"sql": sql, "params": params}
        assert call(query, args)["rows"] == rows, name
    assert ledger.snapshot()[0] == PURCHASES


@pytest.mark.parametrize("sql", STACKED.values(), ids=STACKED.keys())
def test_it_refuses_several_statements_in_sql_execute_and_changes_nothing(
    ledger: Ledger, personas: Personas, sql: str
) -> None:
    before = ledger.snapshot()
    with pytest.raises(ToolError):
        call(ledger.execute(personas), {"sql": sql})
    assert ledger.snapshot() == before


def test_sql_execute_runs_one_write_and_commits_it(ledger: Ledger, personas: Personas) -> None:
    execute = ledger.execute(personas)
    mark = "%s" if ledger.engine == "postgresql" else "?"
    result = call(
        execute,
        {
            "sql": "UPDATE purchases SET status = ? WHERE id = ?".replace("?", mark),
            "params": ["paid", "PO-1"],
        },
    )
    assert result == {"rowcount": 1}
    assert call(execute, {"sql": "CREATE TABLE notes (n integer)"}) == {"rowcount": None}
    rows, tables = ledger.snapshot()
    assert rows[0] == ("PO-1", "Lumen", "paid") and ("notes",) in tables


# --- sql_execute through the engine: a write, gated and blocked like one ----------------------------


def database_agent(personas: Personas, ledger: Ledger, *turns: dict[str, Any]) -> Any:
    connector = make_database_connector(personas.org, ledger.dsn)
    return make_agent(
        personas.org,
        personas.operator,
        actions=[make_action(connector, "database")],
        model_config_json=scripted(*turns, {"content": "Outcome: {last}"}),
    )


DELETE_CALL = {"tool_calls": [{"name": "ledger__sql_execute", "arguments": {"sql": "DELETE FROM purchases"}}]}
READ_CALL = {
    "tool_calls": [{"name": "ledger__sql_query", "arguments": {"sql": "SELECT count(*) AS n FROM purchases"}}]
}


def test_sql_execute_waits_for_a_person_before_anything_runs(
    ledger: Ledger, personas: Personas, resumes: Any
) -> None:
    set_policy(personas)
    before = ledger.snapshot()
    run = run_start(agent=database_agent(personas, ledger, DELETE_CALL), user=personas.member, input="wipe")

    assert async_to_sync(run_execute)(run.pk) == RunStatus.AWAITING_APPROVAL

    request = ConfirmationRequest.objects.get(run=run)
    assert (request.tool_name, request.status) == ("ledger__sql_execute", ConfirmationStatus.PENDING)
    assert request.tool_args == {"sql": "DELETE FROM purchases"}
    assert not ToolExecution.objects.filter(run=run).exists()
    assert ledger.snapshot() == before


def test_it_blocks_sql_execute_in_a_read_only_organisation_and_still_allows_sql_query(
    ledger: Ledger, personas: Personas
) -> None:
    personas.org.read_only = True
    personas.org.save(update_fields=["read_only"])
    before = ledger.snapshot()
    agent = database_agent(personas, ledger, READ_CALL, DELETE_CALL)
    run = run_start(agent=agent, user=personas.member, input="count, then wipe")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("agents.services.dispatch_execute", lambda run_id: None)
        assert async_to_sync(run_execute)(run.pk) == RunStatus.COMPLETED

    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert (blocked["tool"], blocked["blocked_by"]) == ("ledger__sql_execute", "read_only_guard")
    assert list(ToolExecution.objects.filter(run=run).values_list("tool_name", "status")) == [
        ("ledger__sql_query", ToolExecution.Status.SUCCEEDED)
    ]
    assert not ConfirmationRequest.objects.filter(run=run).exists()
    assert ledger.snapshot() == before


# --- credentials never in an error -----------------------------------------------------------------

SECRET = "s3cret-Pa55"
MALFORMED_DSNS = {
    "a URL with a bad port": f"postgres://u:{SECRET}@127.0.0.1:bad/db",
    "a URL psycopg quotes back": f"postgresql://u:{SECRET}@[::1/db",
    "a URL to a closed port": f"postgres://u:{SECRET}@127.0.0.1:1/db",
    "a percent-encoded password": f"postgres://u:{SECRET}%2F%40x@127.0.0.1:1/db",
    "a password in the query string": f"postgres://u@127.0.0.1:1/db?password={SECRET}",
    "a key=value DSN": f"host=127.0.0.1 port=1 user=u password={SECRET} dbname=db",
    "a quoted key=value password": f"host=127.0.0.1 port=bad password='{SECRET} x'",
    "a key=value DSN psycopg cannot read": f"host=127.0.0.1 password={SECRET} oops",
}


@pytest.mark.parametrize("dsn", MALFORMED_DSNS.values(), ids=MALFORMED_DSNS.keys())
def test_it_never_shows_a_dsns_password_in_a_tool_error(personas: Personas, dsn: str) -> None:
    connector = make_database_connector(personas.org, dsn, read_dsn=dsn)
    for tool in database_tools(connector):
        with pytest.raises(ToolError) as failed:
            call(tool, {"sql": "SELECT 1"})
        message = str(failed.value)
        # key=value DSNs are not accepted (postgres://… only): refused before any driver runs.
        expected = "PostgreSQL error" if "://" in dsn else "the connector 'Ledger' has no usable DSN"
        assert message.startswith(expected), message
        assert SECRET not in message and "Pa55" not in message, message
        assert SECRET not in repr(tool)


def test_it_never_shows_the_sqlite_files_path(personas: Personas, tmp_path: Path) -> None:
    hidden = tmp_path / "private-dir" / "ledger.sqlite3"
    (query, execute) = database_tools(make_database_connector(personas.org, f"sqlite:///{hidden}"))
    for tool in (query, execute):
        with pytest.raises(ToolError, match="unable to open database file") as failed:
            call(tool, {"sql": "SELECT 1"})
        assert "private-dir" not in str(failed.value)


def test_a_run_never_shows_a_connectors_password_anywhere(personas: Personas, monkeypatch: Any) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    connector = make_database_connector(personas.org, MALFORMED_DSNS["a URL psycopg quotes back"])
    agent = make_agent(
        personas.org,
        personas.operator,
        actions=[make_action(connector, "database")],
        model_config_json=scripted(READ_CALL, {"content": "The tool said: {last}"}),
    )
    run = run_start(agent=agent, user=personas.member, input="count the purchases")

    assert async_to_sync(run_execute)(run.pk) == RunStatus.COMPLETED

    run = Run.objects.get(pk=run.pk)
    [execution] = ToolExecution.objects.filter(run=run)
    assert execution.status == ToolExecution.Status.FAILED
    assert "PostgreSQL error" in execution.result and "postgresql://u:***@" in execution.result
    recorded = json.dumps(
        {
            "output": run.output,
            "error": run.error,
            "checkpoint": run.checkpoint,
            "events": list(RunEvent.objects.filter(run=run).values_list("payload", flat=True)),
            "messages": list(RunMessage.objects.filter(run=run).values_list("message", flat=True)),
            "executions": list(ToolExecution.objects.filter(run=run).values("args", "result")),
        }
    )
    assert "PostgreSQL error" in run.output, "the model did read the (masked) error"
    assert SECRET not in recorded


def test_it_refuses_a_connector_whose_read_dsn_is_not_a_string(personas: Personas) -> None:
    connector = Connector(
        organization=personas.org,
        slug="ledger",
        name="Ledger",
        kind=Connector.Kind.DATABASE,
        secrets={"dsn": "sqlite:///ledger.sqlite3", "read_dsn": {"user": "reader"}},
    )
    with pytest.raises(ValidationError, match="read_dsn must be a DSN string"):
        connector.full_clean()
