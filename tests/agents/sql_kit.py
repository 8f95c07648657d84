"""A purchases ledger in a real database for the SQL tool tests, and ``call`` to run a tool. ``ledger``
is a temporary SQLite file or, marked ``postgres``, a scratch schema of the PostgreSQL test database
(created and committed, dropped afterwards); ``pg_ledger`` is the PostgreSQL one alone."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from agents.tools.base import Tool
from agents.tools.database import database_tools
from tests.personas import Personas, make_database_connector

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
