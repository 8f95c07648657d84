"""The SQL tools refusing writes and stacked statements as an attacker would send them, at every layer
(parser, driver, read-only session, read-only role), on SQLite and PostgreSQL: the tool says no, and
the table is exactly as it was."""

from __future__ import annotations

import pytest

from agents.tools.base import ToolError
from agents.tools.database import DRIVERS, postgres_connect
from tests.agents.sql_kit import Ledger, call, ledger, pg_ledger
from tests.personas import Personas

__all__ = ["ledger", "pg_ledger"]


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


@pytest.mark.parametrize("sql", STACKED.values(), ids=STACKED.keys())
def test_it_refuses_several_statements_in_sql_execute_and_changes_nothing(
    ledger: Ledger, personas: Personas, sql: str
) -> None:
    before = ledger.snapshot()
    with pytest.raises(ToolError):
        call(ledger.execute(personas), {"sql": sql})
    assert ledger.snapshot() == before
