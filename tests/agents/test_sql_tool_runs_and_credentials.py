"""sql_execute in a run, gated and blocked like any write, and a database connector's credentials
(DSN password, SQLite path) never shown in a tool error or anywhere a run records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError

from agents import events as ev
from agents.engine.runner import run_execute
from agents.models import Connector, Run, RunEvent, RunMessage, RunStatus, ToolExecution
from agents.services import run_start
from agents.tools.base import ToolError
from agents.tools.database import database_tools
from approvals.models import ConfirmationRequest, ConfirmationStatus
from tests.agents.engine_kit import events_of
from tests.agents.sql_kit import Ledger, call, ledger
from tests.approvals.kit import set_policy
from tests.personas import Personas, make_action, make_agent, make_database_connector, scripted

__all__ = ["ledger"]


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
