"""What the SQL tools do run, on SQLite and PostgreSQL: legitimate reads, a read DSN, one committed
write, and the connector's statement timeout."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from agents.tools.base import ToolError
from tests.agents.sql_kit import PURCHASES, Ledger, call, ledger, pg_ledger
from tests.personas import Personas

__all__ = ["ledger", "pg_ledger"]


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
