"""The SQL read tool calls only functions a read needs, so nothing it runs outlives the read-only
transaction or reaches the server's files, sessions, settings or other connections.

The payloads run against real databases: PostgreSQL as the superuser that owns the test database
(the privileged DSN an operator should not give the read tool, but might; marked ``postgres``) and a
SQLite file. A refusal names the function and the write tool, the read-only guard calls the same
SQL a write, and what the call would have done did not happen.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlglot.dialects.dialect import Dialect as SqlglotDialect

from agents.guards import ToolFacts, write_reason
from agents.tools.base import ToolError
from agents.tools.database import DRIVERS
from agents.tools.sql_guard import READ_FUNCTIONS, Dialect, classify_sql
from tests.agents.sql_kit import PURCHASES, Ledger, _postgres_ledger, _sqlite_ledger, call
from tests.personas import Personas


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger(request: pytest.FixtureRequest, personas: Personas, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        yield from _sqlite_ledger(tmp_path)
    else:
        yield from _postgres_ledger()


@pytest.fixture
def pg_ledger(personas: Personas) -> Iterator[Ledger]:
    yield from _postgres_ledger()


@pytest.fixture
def sqlite_ledger(personas: Personas, tmp_path: Path) -> Iterator[Ledger]:
    yield from _sqlite_ledger(tmp_path)


def refusal(ledger: Ledger, personas: Personas, sql: str) -> str:
    """The read tool's refusal of ``sql``; the table is checked to be as it was."""
    before = ledger.snapshot()
    with pytest.raises(ToolError) as refused:
        call(ledger.query(personas), {"sql": sql})
    assert ledger.snapshot() == before
    return str(refused.value)


def names_the_call(message: str, function: str) -> bool:
    return f"{function}() is not one of them" in message and "through ledger__sql_execute" in message


# --- PostgreSQL, as a superuser ---------------------------------------------------------------------

REFUSED_ON_POSTGRES = {
    "a server file": ("SELECT pg_read_file('/etc/hostname') AS f", "pg_read_file"),
    "a server file, the schema named": (
        "SELECT pg_catalog.pg_read_file('/etc/hostname')",
        "pg_catalog.pg_read_file",
    ),
    "a server file, the name quoted": ("SELECT \"pg_read_file\"('/etc/hostname')", '"pg_read_file"'),
    "a server file, the name quoted in capitals": (
        "SELECT \"PG_READ_FILE\"('/etc/hostname')",
        '"PG_READ_FILE"',
    ),
    "a server file in a subquery of a CTE": (
        "WITH f AS (SELECT (SELECT pg_read_file('/etc/hostname')) AS f) SELECT f FROM f",
        "pg_read_file",
    ),
    "a server file in ORDER BY": (
        "SELECT id FROM purchases ORDER BY (SELECT pg_read_file('/etc/hostname'))",
        "pg_read_file",
    ),
    "a server file in a cast": ("SELECT CAST(pg_read_file('/etc/hostname') AS text) AS f", "pg_read_file"),
    "a server directory from a lateral function in FROM": (
        "SELECT d FROM purchases, LATERAL pg_ls_dir('.') AS d",
        "pg_ls_dir",
    ),
    "a server file into a large object": ("SELECT lo_import('/etc/hostname') AS oid", "lo_import"),
    "a session default": ("SELECT set_config('default_transaction_read_only', 'off', false)", "set_config"),
    "a server setting": ("SELECT current_setting('data_directory') AS d", "current_setting"),
    "another connection, through an extension that is not installed": (
        "SELECT * FROM dblink('dbname=postgres', 'SELECT 1') AS t(x int)",
        "dblink",
    ),
    "another session": ("SELECT pg_terminate_backend(2147483647) AS gone", "pg_terminate_backend"),
    "a sleep": ("SELECT pg_sleep(0.01) AS slept", "pg_sleep"),
    "a sequence": ("SELECT nextval('purchases_seq') AS n", "nextval"),
    "an advisory lock": ("SELECT pg_advisory_lock(42)", "pg_advisory_lock"),
    "a transaction id": ("SELECT txid_current() AS x", "txid_current"),
    "SQL run by a function, out of the parser's sight": (
        "SELECT query_to_xml('SELECT pg_read_file(''/etc/hostname'')', true, true, '') AS x",
        "query_to_xml",
    ),
    "a look-alike of a listed function in another schema": ("SELECT public.lower('x') AS l", "public.lower"),
    "a look-alike of a listed table function in another schema": (
        "SELECT * FROM public.generate_series(1, 2) AS g",
        "public.generate_series",
    ),
}


@pytest.mark.postgres
@pytest.mark.parametrize(("sql", "function"), REFUSED_ON_POSTGRES.values(), ids=REFUSED_ON_POSTGRES.keys())
def test_a_postgres_read_refuses_a_call_off_its_list_and_names_it(
    pg_ledger: Ledger, personas: Personas, sql: str, function: str
) -> None:
    message = refusal(pg_ledger, personas, sql)
    assert names_the_call(message, function), message


@pytest.mark.postgres
def test_a_replication_slot_is_refused_although_the_read_only_transaction_would_keep_it(
    pg_ledger: Ledger, personas: Personas
) -> None:
    import psycopg

    slot = f"fimone_probe_{uuid.uuid4().hex[:10]}"
    sql = f"SELECT pg_create_physical_replication_slot('{slot}', true) AS slot"
    admin = psycopg.connect(pg_ledger.dsn, autocommit=True)

    def slots() -> int:
        row = admin.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
        return row[0] if row else 0

    try:
        message = refusal(pg_ledger, personas, sql)
        assert names_the_call(message, "pg_create_physical_replication_slot"), message
        assert slots() == 0
        # Past the parser, the read-only transaction alone lets the slot (and the WAL it holds) stay.
        DRIVERS["postgresql"](pg_ledger.dsn, sql, (), "query", 5.0)
        assert slots() == 1
    finally:
        admin.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )
        admin.close()


REPORTS_ON_POSTGRES = {
    "aggregates and a join": (
        "SELECT p.status, count(*) AS n, string_agg(p.id, ',' ORDER BY p.id) AS ids, "
        "array_agg(DISTINCT q.vendor ORDER BY q.vendor) AS vendors "
        "FROM purchases p JOIN purchases q ON q.status = p.status GROUP BY p.status ORDER BY p.status",
        [
            {"status": "paid", "n": 1, "ids": "PO-3", "vendors": ["Bolt"]},
            {"status": "pending", "n": 4, "ids": "PO-1,PO-1,PO-2,PO-2", "vendors": ["Lumen", "Northwind"]},
        ],
    ),
    "window functions": (
        "SELECT id, row_number() OVER (PARTITION BY status ORDER BY id DESC) AS nth, "
        "lag(id) OVER (ORDER BY id) AS before FROM purchases ORDER BY id",
        [
            {"id": "PO-1", "nth": 2, "before": None},
            {"id": "PO-2", "nth": 1, "before": "PO-1"},
            {"id": "PO-3", "nth": 1, "before": "PO-2"},
        ],
    ),
    "dates": (
        "SELECT date_trunc('month', TIMESTAMP '2024-05-17 10:30')::date AS month, "
        "extract(year FROM DATE '2024-05-17')::int AS year, "
        "date_part('day', DATE '2024-05-17')::int AS day, "
        "to_char(DATE '2024-05-17', 'YYYY-MM') AS ym, DATE '2024-05-17' + 3 AS later, "
        "age(TIMESTAMP '2024-05-17', TIMESTAMP '2024-05-10')::text AS waited, "
        "now() >= DATE '2024-01-01' AS ok",
        [
            {
                "month": "2024-05-01",
                "year": 2024,
                "day": 17,
                "ym": "2024-05",
                "later": "2024-05-20",
                "waited": "7 days",
                "ok": True,
            }
        ],
    ),
    "json operators and functions": (
        'WITH doc(j) AS (SELECT \'{"a": {"b": 2}, "tags": ["x", "y"]}\'::jsonb) '
        "SELECT j -> 'a' ->> 'b' AS b, j #>> '{a,b}' AS path, j @> '{\"a\": {\"b\": 2}}' AS has, "
        "jsonb_array_length(j -> 'tags') AS tags, jsonb_build_object('n', 1) AS built, "
        "(SELECT string_agg(t, '') FROM jsonb_array_elements_text(j -> 'tags') AS t) AS joined FROM doc",
        [{"b": "2", "path": "2", "has": True, "tags": 2, "built": {"n": 1}, "joined": "xy"}],
    ),
    "text, numbers and conditionals": (
        "SELECT lower(vendor) AS v, round(length(vendor) / 3.0, 2) AS r, "
        "coalesce(nullif(status, 'paid'), '-') AS s, "
        "CASE WHEN id LIKE '%3' THEN 'last' ELSE upper(left(id, 2)) END AS c, greatest(1, 2) AS g "
        "FROM purchases WHERE id = 'PO-3'",
        [{"v": "bolt", "r": 1.33, "s": "-", "c": "last", "g": 2}],
    ),
    "table functions in FROM": (
        "SELECT n, x FROM generate_series(1, 2) AS n, "
        "unnest(ARRAY['a']) WITH ORDINALITY AS u(x, i) ORDER BY n",
        [{"n": 1, "x": "a"}, {"n": 2, "x": "a"}],
    ),
}


@pytest.mark.postgres
@pytest.mark.parametrize(("sql", "rows"), REPORTS_ON_POSTGRES.values(), ids=REPORTS_ON_POSTGRES.keys())
def test_ordinary_reporting_sql_still_runs_on_postgres(
    pg_ledger: Ledger, personas: Personas, sql: str, rows: list[dict[str, Any]]
) -> None:
    assert call(pg_ledger.query(personas), {"sql": sql})["rows"] == rows
    assert pg_ledger.snapshot()[0] == PURCHASES


# --- SQLite -------------------------------------------------------------------------------------------

REFUSED_ON_SQLITE = {
    "an extension's native code": ("SELECT load_extension('/tmp/evil.so') AS x", "load_extension"),
    "a file read": ("SELECT readfile('/etc/hostname') AS f", "readfile"),
    "a file written": ("SELECT writefile('/tmp/fimone-probe', 'x') AS n", "writefile"),
    "a file read in a subquery of a CTE": (
        "WITH f AS (SELECT (SELECT readfile('/etc/hostname')) AS f) SELECT f FROM f",
        "readfile",
    ),
    "a tokenizer pointer": ("SELECT fts3_tokenizer('simple') AS p", "fts3_tokenizer"),
    "a function named with a schema": ("SELECT main.lower('x') AS l", "main.lower"),
}


@pytest.mark.parametrize(("sql", "function"), REFUSED_ON_SQLITE.values(), ids=REFUSED_ON_SQLITE.keys())
def test_a_sqlite_read_refuses_a_call_off_its_list_and_names_it(
    sqlite_ledger: Ledger, personas: Personas, sql: str, function: str
) -> None:
    message = refusal(sqlite_ledger, personas, sql)
    assert names_the_call(message, function), message
    assert not Path("/tmp/fimone-probe").exists()  # where the payload would have written


REPORTS_ON_SQLITE = {
    "aggregates, a join and randomblob": (
        "SELECT p.status, count(*) AS n, group_concat(p.id, ',') AS ids, length(randomblob(8)) AS noise "
        "FROM purchases p JOIN purchases q ON q.id = p.id GROUP BY p.status ORDER BY p.status",
        [
            {"status": "paid", "n": 1, "ids": "PO-3", "noise": 8},
            {"status": "pending", "n": 2, "ids": "PO-1,PO-2", "noise": 8},
        ],
    ),
    "window functions": (
        "SELECT id, row_number() OVER (PARTITION BY status ORDER BY id DESC) AS nth "
        "FROM purchases ORDER BY id",
        [{"id": "PO-1", "nth": 2}, {"id": "PO-2", "nth": 1}, {"id": "PO-3", "nth": 1}],
    ),
    "dates": (
        "SELECT strftime('%Y-%m', '2024-05-17') AS ym, date('2024-05-17', '+3 days') AS later, "
        "julianday('2024-05-17') - julianday('2024-05-10') AS waited",
        [{"ym": "2024-05", "later": "2024-05-20", "waited": 7.0}],
    ),
    "json": (
        "SELECT json_extract('{\"a\": {\"b\": 2}}', '$.a.b') AS b, '{\"a\": 1}' ->> '$.a' AS a, "
        "(SELECT count(*) FROM json_each('[1, 2, 3]')) AS n",
        [{"b": 2, "a": 1, "n": 3}],
    ),
    "the schema, through a pragma table function": (
        "SELECT name FROM pragma_table_info('purchases') ORDER BY cid",
        [{"name": "id"}, {"name": "vendor"}, {"name": "status"}],
    ),
}


@pytest.mark.parametrize(("sql", "rows"), REPORTS_ON_SQLITE.values(), ids=REPORTS_ON_SQLITE.keys())
def test_ordinary_reporting_sql_still_runs_on_sqlite(
    sqlite_ledger: Ledger, personas: Personas, sql: str, rows: list[dict[str, Any]]
) -> None:
    assert call(sqlite_ledger.query(personas), {"sql": sql})["rows"] == rows


# --- the lists themselves, and the read-only guard ---------------------------------------------------

ARGUMENT_SHAPES = ("1", "1, 2", "'a', 'b', 'c'", "", "'a', 1", "SELECT 1")


def passes_when_called(name: str, shapes: tuple[str, ...], dialect: Dialect) -> bool:
    """Whether ``SELECT name(…) FROM t`` is a read for one of the argument ``shapes``."""
    calls = (f"SELECT {name}({shape}) FROM t" for shape in shapes)  # noqa: S608 - parsed, never run
    return any(classify_sql(sql, dialect=dialect).is_read for sql in calls)


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_every_function_on_a_list_passes_the_guard_when_called(dialect: Dialect) -> None:
    refused = [
        name
        for name in sorted(READ_FUNCTIONS[dialect])
        if not passes_when_called(name, ARGUMENT_SHAPES, dialect)
    ]
    assert refused == []


# Keyword forms sqlglot parses by a rule of its own, without recording a name, and whose kind the
# guard accepts: casts, and functions the database either has and only computes with, or has not.
KNOWN_KEYWORD_FORMS = {
    "cast", "safe_cast", "try_cast", "json_value", "chr", "decode", "extract", "initcap", "normalize",
    "overlay", "position",
}  # fmt: skip


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_no_keyword_form_the_parser_reads_without_a_name_passes_unless_it_is_known(dialect: Dialect) -> None:
    """A tripwire for a new sqlglot: a keyword form it adds must be looked at before it passes."""
    keyword_forms = SqlglotDialect.get_or_raise(dialect).parser_class.FUNCTION_PARSERS
    shapes = (*ARGUMENT_SHAPES, "a AS int", "a FROM b", "a IN b", "a PLACING b FROM 1")
    passing = {form.lower() for form in keyword_forms if passes_when_called(form, shapes, dialect)}
    assert passing - READ_FUNCTIONS[dialect] <= KNOWN_KEYWORD_FORMS


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgres", "SELECT pg_read_file('/etc/hostname')"),
        ("postgres", "SELECT id FROM purchases ORDER BY (SELECT pg_read_file('/etc/hostname'))"),
        ("sqlite", "WITH f AS (SELECT pg_read_file('/etc/hostname')) SELECT * FROM f"),
    ],
)
def test_the_read_only_guard_calls_a_read_that_calls_a_function_off_the_list_a_write(
    dialect: Dialect, sql: str
) -> None:
    reason = write_reason(ToolFacts(sql_dialects=(dialect,)), {"sql": sql})
    assert reason == "SQL that is not one read statement (a call to pg_read_file())"


@pytest.mark.parametrize("sql", [sql for sql, _ in REPORTS_ON_POSTGRES.values()])
def test_the_read_only_guard_lets_ordinary_reporting_sql_through(sql: str) -> None:
    assert write_reason(ToolFacts(sql_dialects=("postgres",)), {"sql": sql}) is None
