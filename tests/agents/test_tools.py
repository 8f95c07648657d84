"""Tools: HTTP connector actions against a real local HTTP server, database connectors against a
temporary SQLite file, the built-ins, and the toolbox that assembles an agent's tools."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from agents.models import Agent, Connector, ConnectorAction
from agents.tools.base import Tool, ToolError
from agents.tools.builtins import Calculator, CurrentTime
from agents.tools.database import MAX_ROWS, SqlExecuteTool, SqlQueryTool, database_tools
from agents.tools.http import MAX_TEXT_CHARS, HttpActionTool
from agents.tools.toolbox import ToolboxError, tools_for_agent
from tests.personas import Personas, make_action, make_agent, make_http_connector

# --- a real HTTP service ----------------------------------------------------------------------------


@dataclass
class SeenRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


# route (under /api/) → status, content type, body; anything else answers 200 {"ok": true}.
ROUTES: dict[str, tuple[int, str, bytes]] = {
    "text": (200, "text/plain; charset=utf-8", b"plain words"),
    "long-text": (200, "text/html", b"x" * (MAX_TEXT_CHARS + 5_000)),
    "broken": (500, "text/plain", b"Internal error:\n   the ledger is locked\n"),
    "missing": (404, "application/json", b'{"error": "not_found"}'),
    "empty": (204, "text/plain", b""),
}


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), RecordingHandler)
        self.seen: list[SeenRequest] = []
        self.release = threading.Event()  # set at teardown so a "slow" handler stops waiting

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api/"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (the timeout test) is expected: no traceback on stderr."""


class RecordingHandler(BaseHTTPRequestHandler):
    server: RecordingServer
    protocol_version = "HTTP/1.1"

    def answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        split = urlsplit(self.path)
        self.server.seen.append(
            SeenRequest(
                method=self.command,
                path=split.path,
                query=parse_qs(split.query),
                headers={name.lower(): value for name, value in self.headers.items()},
                body=body,
            )
        )
        route = split.path.removeprefix("/api/")
        if route == "slow":
            self.server.release.wait(10)
        status, content_type, payload = ROUTES.get(route, (200, "application/json", b'{"ok": true}'))
        if route == "echo-auth":  # a careless service quoting the credentials it refused
            quoted = (
                f"rejected {self.headers.get('Authorization')} and token {self.headers.get('X-Demo-Token')}"
            )
            status, content_type, payload = 401, "text/plain", quoted.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads ``server.seen`` instead."""


@pytest.fixture
def service() -> Iterator[RecordingServer]:
    server = RecordingServer()
    # A short poll so shutdown() at teardown returns at once instead of after the default 0.5 s.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


SECRET_HEADERS = {"Authorization": "Bearer s3cret-value", "X-Demo-Token": "t0ken"}


def http_tool(connector: Connector, name: str, *, method: str = "GET", path: str = "", **fields: Any) -> Tool:
    """Build the tool the way the toolbox does: from rows read back (secrets decrypted)."""
    action = make_action(connector, name, method=method, path=path, **fields)
    return HttpActionTool(action=ConnectorAction.objects.select_related("connector").get(pk=action.pk))


def call(tool: Tool, args: dict[str, Any]) -> Any:
    """Run a tool in a fresh event loop, as a run's worker would (the test itself stays sync so
    it may use the ORM to build the tool)."""
    return asyncio.run(tool.run(args))


@pytest.fixture
def connector(personas: Personas, service: RecordingServer) -> Connector:
    return make_http_connector(
        personas.org, service.base_url, secrets={"headers": SECRET_HEADERS}, timeout_seconds=2.0
    )


# --- HTTP tools ---------------------------------------------------------------------------------------


def test_an_http_tool_takes_its_spec_from_the_action(connector: Connector) -> None:
    schema = {
        "type": "object",
        "properties": {"purchase_id": {"type": "string"}},
        "required": ["purchase_id"],
    }
    tool = http_tool(
        connector,
        "purchase_pay",
        method="POST",
        path="purchases/{purchase_id}/pay",
        description="Pay a purchase.",
        parameters_schema=schema,
    )
    assert tool.spec.name == "oa__purchase_pay"
    assert tool.spec.description == "Pay a purchase."
    assert tool.spec.parameters == schema
    assert tool.spec.requires_confirmation is True
    assert tool.spec.is_write is True


def test_an_action_without_a_schema_offers_an_empty_object_schema(connector: Connector) -> None:
    tool = http_tool(connector, "ping", parameters_schema={})
    assert tool.spec.parameters == {"type": "object", "properties": {}}
    assert tool.spec.requires_confirmation is False
    assert tool.spec.is_write is False


def test_path_placeholders_are_filled_from_the_arguments_and_url_quoted(
    connector: Connector, service: RecordingServer
) -> None:
    tool = http_tool(connector, "notes", path="items/{item_id}/notes/{n}")
    call(tool, {"item_id": "a b/c?d", "n": 7, "q": "x"})
    (seen,) = service.seen
    assert seen.path == "/api/items/a%20b%2Fc%3Fd/notes/7"
    assert seen.query == {"q": ["x"]}


def test_a_missing_path_argument_is_a_tool_error_and_nothing_is_sent(
    connector: Connector, service: RecordingServer
) -> None:
    tool = http_tool(connector, "notes", path="items/{item_id}/notes")
    with pytest.raises(ToolError, match=r"missing argument.*item_id"):
        call(tool, {"q": "x"})
    assert service.seen == []


HOSTILE_PATH_VALUES = [
    "..",
    ".",
    "%2e%2e",
    ".%2E",
    "%2E.",
    "%2e",
    "%252e%252e",  # decoded twice by a proxy and then the service
    "../admin",
    "..\\admin",
    "a/../../x",
    "x/..",
    "%2e%2e%2fadmin",
    "\uff0e\uff0e",  # fullwidth full stops, folded to ".." by NFKC-normalising servers
    " .. ",
    "",
]


@pytest.mark.parametrize("value", HOSTILE_PATH_VALUES)
def test_it_refuses_path_arguments_that_would_leave_the_path_and_sends_nothing(
    connector: Connector, service: RecordingServer, value: str
) -> None:
    tool = http_tool(connector, "purchase_get", path="/purchases/{id}")

    with pytest.raises(ToolError) as refused:
        call(tool, {"id": value})

    assert service.seen == []
    assert str(refused.value).startswith("refused: the argument")
    assert "'id'" in str(refused.value) and "nothing was sent" in str(refused.value)


@pytest.mark.parametrize(
    ("template", "args"),
    [
        ("{a}", {"a": ".."}),  # straight to the service's root with the connector's credentials
        ("{a}{b}", {"a": ".", "b": "."}),
        ("{a}.", {"a": ""}),  # each value harmless, together a dot segment
        ("files/{name}/raw", {"name": ""}),
    ],
)
def test_it_refuses_values_that_together_with_the_template_leave_the_path(
    connector: Connector, service: RecordingServer, template: str, args: dict[str, str]
) -> None:
    with pytest.raises(ToolError, match=r"^refused: .*nothing was sent$"):
        call(http_tool(connector, "fetch", path=template), args)

    assert service.seen == []


@pytest.mark.parametrize(
    "template",
    ["../admin", "/../../etc/passwd", "x/../../../..//evil.example/x", "%2e%2e/admin", "a/%2E%2E/%2e%2e/b"],
)
def test_it_refuses_a_template_whose_final_url_leaves_the_base(
    connector: Connector, service: RecordingServer, template: str
) -> None:
    tool = http_tool(connector, "escape", path=template)

    with pytest.raises(ToolError, match=r"^refused: GET .*outside the connector's base URL \(path '/api'\)"):
        call(tool, {})

    assert service.seen == []


@pytest.mark.parametrize(
    "value",
    ["a/b", "a b", "Ünïcødé ✓", "...", ".hidden", "v1.2", "a..b", "..a", "50%", "%2F", "x?y#z", "0"],
)
def test_ordinary_path_values_work_and_stay_inside_one_segment(
    connector: Connector, service: RecordingServer, value: str
) -> None:
    tool = http_tool(connector, "item_notes", path="items/{id}/notes")

    assert call(tool, {"id": value}) == {"ok": True}

    (seen,) = service.seen
    parts = seen.path.split("/")
    assert parts[:3] == ["", "api", "items"] and parts[4:] == ["notes"] and len(parts) == 5
    assert unquote(parts[3]) == value


def test_a_dot_in_a_templates_query_is_no_path_and_is_sent(
    connector: Connector, service: RecordingServer
) -> None:
    call(http_tool(connector, "search", method="POST", path="search?q={q}"), {"q": ".."})

    (seen,) = service.seen
    assert (seen.path, seen.query) == ("/api/search", {"q": [".."]})


@pytest.mark.django_db
def test_a_refused_path_reaches_the_model_as_an_observation_saying_why(
    personas: Personas, service: RecordingServer
) -> None:
    from asgiref.sync import async_to_sync

    from agents.engine.runner import run_execute
    from agents.models import RunEvent, ToolExecution
    from agents.services import run_start
    from tests.personas import scripted

    connector = make_http_connector(personas.org, service.base_url, secrets={"headers": SECRET_HEADERS})
    action = make_action(connector, "purchase_get", path="purchases/{id}")
    turns = ({"tool_calls": [{"name": "oa__purchase_get", "arguments": {"id": ".."}}]}, {"content": "Done."})
    agent = make_agent(personas.org, personas.operator, model_config_json=scripted(*turns), actions=[action])
    run = run_start(agent=agent, user=personas.member, input="show me the purchase")

    async_to_sync(run_execute)(run.pk)

    assert service.seen == []
    execution = ToolExecution.objects.get(run=run)
    assert execution.status == ToolExecution.Status.FAILED
    assert "refused: the argument 'id'" in json.dumps(execution.result)
    assert RunEvent.objects.filter(run=run).exists()


def test_get_arguments_go_to_the_query_string(connector: Connector, service: RecordingServer) -> None:
    tool = http_tool(connector, "purchase_list", path="purchases")
    result = call(tool, {"status": "pending", "limit": 5, "tags": ["a", "b"], "urgent": True, "none": None})
    (seen,) = service.seen
    assert result == {"ok": True}
    assert (seen.method, seen.path, seen.body) == ("GET", "/api/purchases", b"")
    assert seen.query == {"status": ["pending"], "limit": ["5"], "tags": ["a", "b"], "urgent": ["true"]}


def test_post_arguments_other_than_the_path_go_to_a_json_body(
    connector: Connector, service: RecordingServer
) -> None:
    tool = http_tool(connector, "purchase_pay", method="POST", path="purchases/{purchase_id}/pay")
    call(tool, {"purchase_id": "PO-1001", "amount": 1200.0, "note": "for March"})
    (seen,) = service.seen
    assert (seen.method, seen.path, seen.query) == ("POST", "/api/purchases/PO-1001/pay", {})
    assert seen.headers["content-type"] == "application/json"
    assert json.loads(seen.body) == {"amount": 1200.0, "note": "for March"}


def test_the_connectors_secret_headers_are_sent_and_kept_out_of_the_repr(
    connector: Connector, service: RecordingServer
) -> None:
    tool = http_tool(connector, "ping", path="ping")
    call(tool, {})
    (seen,) = service.seen
    assert seen.headers["authorization"] == "Bearer s3cret-value"
    assert seen.headers["x-demo-token"] == "t0ken"
    assert "s3cret" not in repr(tool)


def test_a_json_answer_is_parsed_and_any_other_answer_is_text(connector: Connector) -> None:
    assert call(http_tool(connector, "json", path="anything"), {}) == {"ok": True}
    assert call(http_tool(connector, "text", path="text"), {}) == "plain words"
    assert call(http_tool(connector, "empty", path="empty"), {}) == {"status": 204}


def test_a_long_text_answer_is_cut_at_the_limit(connector: Connector) -> None:
    result = call(http_tool(connector, "long_text", path="long-text"), {})
    assert result.startswith("x" * MAX_TEXT_CHARS)
    assert len(result) < MAX_TEXT_CHARS + 100
    assert result.endswith(f"[cut: the answer was longer than {MAX_TEXT_CHARS} characters]")


def test_a_non_2xx_answer_is_a_tool_error_naming_the_call_the_status_and_the_body(
    connector: Connector,
) -> None:
    with pytest.raises(ToolError) as broken:
        call(http_tool(connector, "broken", path="broken"), {})
    assert str(broken.value) == "GET broken answered 500: Internal error: the ledger is locked"
    with pytest.raises(ToolError) as missing:
        call(http_tool(connector, "gone", method="DELETE", path="missing"), {})
    assert str(missing.value) == 'DELETE missing answered 404: {"error": "not_found"}'


def test_a_slow_service_is_a_tool_error_once_the_connectors_timeout_passes(
    personas: Personas, service: RecordingServer
) -> None:
    slow = make_http_connector(personas.org, service.base_url, slug="slow", timeout_seconds=0.3)
    tool = http_tool(slow, "wait", path="slow")
    began = time.monotonic()
    with pytest.raises(ToolError, match=r"^GET slow timed out after 0\.3s$"):
        call(tool, {})
    assert time.monotonic() - began < 3


def test_a_refused_connection_is_a_tool_error(personas: Personas) -> None:
    # A socket bound but not listening: the port is ours and every connection to it is refused.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        nowhere = make_http_connector(personas.org, f"http://127.0.0.1:{port}/", slug="nowhere")
        tool = http_tool(nowhere, "ping", path="ping")
        with pytest.raises(ToolError, match=r"^GET ping: could not connect to the service"):
            call(tool, {})


def test_it_never_shows_the_secret_headers_a_service_echoes_in_its_error(connector: Connector) -> None:
    with pytest.raises(ToolError) as refused:
        call(http_tool(connector, "whoami", path="echo-auth"), {})
    assert str(refused.value) == "GET echo-auth answered 401: rejected *** and token ***"


def test_it_never_shows_the_password_of_a_base_url(personas: Personas) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        for slug, base_url in [
            ("refused", f"http://svc:hunter22@127.0.0.1:{port}/api/"),
            ("badport", "http://svc:hunter22@127.0.0.1:bad/api/"),
        ]:
            tool = http_tool(make_http_connector(personas.org, base_url, slug=slug), "ping", path="ping")
            assert "hunter22" not in repr(tool) and "svc:***@" in repr(tool)
            with pytest.raises(ToolError) as failed:
                call(tool, {})
            assert "hunter22" not in str(failed.value)


def test_one_http_tool_serves_calls_from_different_event_loops_and_threads(
    connector: Connector, service: RecordingServer
) -> None:
    tool = http_tool(connector, "ping", path="ping")
    results = [call(tool, {}), call(tool, {})]
    worker = threading.Thread(target=lambda: results.append(call(tool, {})))
    worker.start()
    worker.join(timeout=10)
    assert results == [{"ok": True}] * 3
    assert len(service.seen) == 3


# --- database tools -----------------------------------------------------------------------------------


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


# --- built-ins -----------------------------------------------------------------------------------------


async def test_the_calculator_evaluates_arithmetic() -> None:
    calculator = Calculator()
    assert (await calculator.run({"expression": "(1200 - 200) * 1.06"}))["value"] == pytest.approx(1060.0)
    assert (await calculator.run({"expression": "7 // 2 + 2 ** 10 - -1"}))["value"] == 1028


@pytest.mark.parametrize("expression", ["__import__('os')", "open('/etc/passwd')", "(1).__class__"])
async def test_the_calculator_refuses_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(ToolError, match="only numbers"):
        await Calculator().run({"expression": expression})


async def test_the_calculator_reports_division_by_zero() -> None:
    with pytest.raises(ToolError, match=r"^division by zero$"):
        await Calculator().run({"expression": "1 / (2 - 2)"})


async def test_current_time_answers_in_the_given_zone_and_refuses_an_unknown_one() -> None:
    shanghai = await CurrentTime().run({"timezone": "Asia/Shanghai"})
    assert shanghai["now"].endswith("+08:00")
    with pytest.raises(ToolError, match="unknown time zone 'Mars/Olympus_Mons'"):
        await CurrentTime().run({"timezone": "Mars/Olympus_Mons"})


# --- the toolbox ---------------------------------------------------------------------------------------


def agent_with_tools(personas: Personas, *, extra_actions: int = 0) -> Agent:
    oa = make_http_connector(personas.org, "http://oa.example.test/api/", secrets={"headers": {"X": "1"}})
    ledger = Connector.objects.create(
        organization=personas.org,
        slug="ledger",
        name="Ledger",
        kind=Connector.Kind.DATABASE,
        secrets={"dsn": "sqlite:///ledger.sqlite3"},
    )
    actions = [
        make_action(oa, "purchase_pay", method="POST", path="purchases/{purchase_id}/pay"),
        make_action(oa, "purchase_list", path="purchases"),
        make_action(ledger, "reporting"),  # any action of a database connector grants its two tools
        make_action(ledger, "reporting_too"),  # … once
    ]
    crm = make_http_connector(personas.org, "http://crm.example.test/", slug="crm")
    actions += [make_action(crm, f"lookup_{n}", path=f"lookup/{n}") for n in range(extra_actions)]
    return make_agent(
        personas.org, personas.operator, actions=actions, builtin_tools=["current_time", "calculator"]
    )


def test_the_toolbox_builds_the_agents_action_database_and_builtin_tools(personas: Personas) -> None:
    agent = agent_with_tools(personas)
    tools = tools_for_agent(Agent.objects.get(pk=agent.pk))
    assert list(tools) == [
        "ledger__sql_query",
        "ledger__sql_execute",
        "oa__purchase_list",
        "oa__purchase_pay",
        "current_time",
        "calculator",
    ]
    assert isinstance(tools["oa__purchase_pay"], HttpActionTool)
    assert tools["oa__purchase_pay"].spec.requires_confirmation is True
    assert isinstance(tools["current_time"], CurrentTime)
    assert all(name == tool.name for name, tool in tools.items())


@pytest.mark.parametrize("extra_actions", [0, 12])
def test_the_toolbox_costs_one_query_however_many_actions_the_agent_has(
    personas: Personas, django_assert_max_num_queries: Any, extra_actions: int
) -> None:
    agent = Agent.objects.get(pk=agent_with_tools(personas, extra_actions=extra_actions).pk)
    with django_assert_max_num_queries(1):
        tools = tools_for_agent(agent)
    assert len(tools) == 6 + extra_actions


def test_the_toolbox_ignores_actions_of_another_organisations_connectors(personas: Personas) -> None:
    foreign = make_http_connector(personas.other_org, "http://globex.example.test/", slug="globex")
    agent = make_agent(
        personas.org,
        personas.operator,
        actions=[make_action(foreign, "steal", path="secrets")],
        builtin_tools=[],
    )
    assert tools_for_agent(agent) == {}


def test_an_unknown_builtin_is_a_toolbox_error(personas: Personas) -> None:
    agent = make_agent(personas.org, personas.operator, builtin_tools=["calculator", "shell"])
    with pytest.raises(ToolboxError, match="unknown built-in tool 'shell'"):
        tools_for_agent(agent)
