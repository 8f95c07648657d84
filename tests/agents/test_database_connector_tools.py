"""Database connector tools against a temporary SQLite file: the read and confirmed write tools a
connector gives, their results, refusals and errors, and the connector's timeout."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from agents.models import Connector
from agents.tools.base import Tool, ToolError
from agents.tools.database import MAX_ROWS, SqlExecuteTool, SqlQueryTool, database_tools
from tests.agents.tools_kit import call
from tests.personas import Personas


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE purchases (id TEXT PRIMARY KEY, vendor TEXT, amount REAL, status TEXT)"
        )
        connection.executemany(
            "INSERT INTO purchases VALUES (?, ?, ?, ?)",
            [
                ("PO-1", "Lumen", 1200.0, "pending"),
                ("PO-2", "Northwind", 4800.0, "pending"),
                ("PO-3", "Bolt", 350.5, "paid"),
            ],
        )
        connection.execute("CREATE TABLE numbers (n INTEGER)")
        connection.executemany("INSERT INTO numbers VALUES (?)", [(n,) for n in range(MAX_ROWS + 50)])
    connection.close()
    return path


def database_connector(personas: Personas, dsn: str, *, timeout_seconds: float = 15.0) -> Connector:
    connector = Connector.objects.create(
        organization=personas.org,
        slug="ledger",
        name="Ledger",
        kind=Connector.Kind.DATABASE,
        secrets={"dsn": dsn},
        timeout_seconds=timeout_seconds,
    )
    return Connector.objects.get(pk=connector.pk)  # read back: the DSN comes out of the encrypted field


@pytest.fixture
def ledger(personas: Personas, ledger_file: Path) -> dict[str, Tool]:
    # sqlite:/// + an absolute path gives four slashes, as in DATABASE_URL.
    tools = database_tools(database_connector(personas, f"sqlite:///{ledger_file}"))
    return {tool.name: tool for tool in tools}


def purchase_count(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT count(*) FROM purchases").fetchone()[0]
    finally:
        connection.close()


def test_a_database_connector_gives_a_read_tool_and_a_confirmed_write_tool(ledger: dict[str, Tool]) -> None:
    query, execute = ledger["ledger__sql_query"], ledger["ledger__sql_execute"]
    assert isinstance(query, SqlQueryTool) and isinstance(execute, SqlExecuteTool)
    assert (query.spec.requires_confirmation, query.spec.is_write) == (False, False)
    assert (execute.spec.requires_confirmation, execute.spec.is_write) == (True, True)
    assert query.spec.parameters["required"] == ["sql"]
    assert set(query.spec.parameters["properties"]) == {"sql", "params"}
    assert "?" in query.spec.description


def test_sql_query_returns_rows_as_dicts(ledger: dict[str, Tool]) -> None:
    result = call(
        ledger["ledger__sql_query"],
        {"sql": "SELECT id, amount FROM purchases WHERE status = ? ORDER BY id", "params": ["pending"]},
    )
    assert result == {
        "columns": ["id", "amount"],
        "rows": [{"id": "PO-1", "amount": 1200.0}, {"id": "PO-2", "amount": 4800.0}],
        "truncated": False,
    }


def test_sql_query_caps_the_rows_and_says_it_truncated(ledger: dict[str, Tool]) -> None:
    result = call(ledger["ledger__sql_query"], {"sql": "-- every number\nSELECT n FROM numbers ORDER BY n;"})
    assert len(result["rows"]) == MAX_ROWS
    assert result["rows"][-1] == {"n": MAX_ROWS - 1}
    assert result["truncated"] is True


def test_a_semicolon_inside_a_literal_does_not_make_a_second_statement(ledger: dict[str, Tool]) -> None:
    result = call(ledger["ledger__sql_query"], {"sql": "SELECT 'a;b' AS s /* ; */ ;"})
    assert result["rows"] == [{"s": "a;b"}]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("DELETE FROM purchases", r"only runs a single SELECT statement, read-only \(got DELETE\)"),
        ("SELECT 1; DELETE FROM purchases", r"\(got 2 statements\)"),
        ("WITH doomed AS (SELECT 1) DELETE FROM purchases", r"\(got DELETE\)"),
    ],
    ids=["a plain delete", "a delete after a select", "a delete behind a cte"],
)
def test_sql_query_refuses_a_write_and_the_table_is_untouched(
    ledger: dict[str, Tool], ledger_file: Path, sql: str, message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        call(ledger["ledger__sql_query"], {"sql": sql})
    assert purchase_count(ledger_file) == 3


def test_sql_execute_commits_and_returns_the_rowcount(ledger: dict[str, Tool], ledger_file: Path) -> None:
    result = call(
        ledger["ledger__sql_execute"],
        {"sql": "UPDATE purchases SET status = ? WHERE status = ?", "params": ["paid", "pending"]},
    )
    assert result == {"rowcount": 2}
    paid = call(
        ledger["ledger__sql_query"], {"sql": "SELECT count(*) AS n FROM purchases WHERE status='paid'"}
    )
    assert paid["rows"] == [{"n": 3}]


def test_an_sql_error_is_a_tool_error_carrying_the_databases_message(ledger: dict[str, Tool]) -> None:
    with pytest.raises(ToolError, match=r"^SQLite error: no such table: nope$"):
        call(ledger["ledger__sql_query"], {"sql": "SELECT * FROM nope"})
    with pytest.raises(ToolError, match=r"^SQLite error: no such column: price$"):
        call(ledger["ledger__sql_execute"], {"sql": "UPDATE purchases SET price = 1"})


def test_a_query_running_past_the_connectors_timeout_is_stopped(
    personas: Personas, ledger_file: Path
) -> None:
    (query, _) = database_tools(database_connector(personas, f"sqlite:///{ledger_file}", timeout_seconds=0.3))
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    began = time.monotonic()
    with pytest.raises(ToolError, match=r"^the query ran longer than 0\.3s and was stopped$"):
        call(query, {"sql": endless})
    assert time.monotonic() - began < 3


def test_a_dsn_naming_a_missing_file_is_an_error_not_a_new_database(
    personas: Personas, tmp_path: Path
) -> None:
    missing = tmp_path / "typo.sqlite3"
    (query, execute) = database_tools(database_connector(personas, f"sqlite:///{missing}"))
    for tool in (query, execute):
        with pytest.raises(ToolError, match="unable to open database file"):
            call(tool, {"sql": "SELECT 1"})
    assert not missing.exists()


def test_an_unsupported_dsn_is_a_tool_error(personas: Personas) -> None:
    (query, _) = database_tools(database_connector(personas, "mysql://root@localhost/shop"))
    with pytest.raises(ToolError, match="has no usable DSN"):
        call(query, {"sql": "SELECT 1"})
