"""End to end: a scripted agent calls a real HTTP connector over the network, through hooks.

The service is a real HTTP server on 127.0.0.1 that records what it receives. One run lists
purchases (a result-rewriting hook redacts account numbers), pays one (an argument-rewriting hook
forces the payment note) and tries to delete one (a blocking hook stops it before the network).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from asgiref.sync import async_to_sync

from agents import events as ev
from agents.engine.runner import run_execute
from agents.models import RunStatus, ToolExecution
from agents.services import run_start
from tests.agents.engine_kit import events_of
from tests.personas import make_action, make_agent, make_http_connector, scripted

PURCHASES = [
    {"id": "PO-1001", "vendor": "Lumen", "amount": 1200.0, "account": "DE89 3704 0044 0532 0130 00"},
    {"id": "PO-1002", "vendor": "Northwind", "amount": 4800.0, "account": "GB29 NWBK 6016 1331 9268 19"},
]


class Service(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.received: list[tuple[str, str, dict | None, str | None]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api/"


class Handler(BaseHTTPRequestHandler):
    server: Service

    def _answer(self, body: object, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.server.received.append((self.command, self.path, body, self.headers.get("X-Api-Key")))
        return body

    def do_GET(self) -> None:
        self._record()
        self._answer(PURCHASES)

    def do_POST(self) -> None:
        body = self._record()
        self._answer({"paid": self.path.split("/")[3], **(body or {})})

    def do_DELETE(self) -> None:
        self._record()
        self._answer({"deleted": True})

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def service() -> Iterator[Service]:
    server = Service()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


PAY_SCHEMA = {
    "type": "object",
    "properties": {
        "purchase_id": {"type": "string"},
        "amount": {"type": "number"},
        "note": {"type": "string"},
    },
    "required": ["purchase_id", "amount"],
}
ID_SCHEMA = {"type": "object", "properties": {"purchase_id": {"type": "string"}}, "required": ["purchase_id"]}


def test_hooks_block_rewrite_and_redact_around_a_real_http_connector(personas, service, monkeypatch) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)
    oa = make_http_connector(personas.org, service.base_url, secrets={"headers": {"X-Api-Key": "k-123"}})
    actions = [
        make_action(oa, "purchase_list", path="purchases"),
        make_action(
            oa,
            "purchase_pay",
            method="POST",
            path="purchases/{purchase_id}/pay",
            parameters_schema=PAY_SCHEMA,
            requires_confirmation=False,
        ),
        make_action(
            oa,
            "purchase_delete",
            method="DELETE",
            path="purchases/{purchase_id}",
            parameters_schema=ID_SCHEMA,
        ),
    ]
    hooks = [
        {
            "name": "deny_tools",
            "params": {"tools": ["oa__*_delete"], "message": "Deleting purchases is not allowed."},
        },
        {
            "name": "set_arguments",
            "params": {"tools": "oa__purchase_pay", "values": {"note": "Paid per policy FIN-7"}},
        },
        {
            "name": "redact_result",
            "params": {"patterns": [r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){4,7}(?: ?\d{1,4})?"]},
        },
    ]
    agent = make_agent(
        personas.org,
        personas.operator,
        actions=actions,
        model_config_json=scripted(
            {"tool_calls": [{"name": "oa__purchase_list", "arguments": {}}]},
            {
                "tool_calls": [
                    {
                        "name": "oa__purchase_pay",
                        "arguments": {"purchase_id": "$last.0.id", "amount": 1200.0, "note": "asap"},
                    },
                    {"name": "oa__purchase_delete", "arguments": {"purchase_id": "PO-1002"}},
                ]
            },
            {"content": "Done."},
            hooks=hooks,
        ),
    )
    run = run_start(agent=agent, user=personas.member, input="pay the first purchase, delete the second")

    assert async_to_sync(run_execute)(run.pk) == RunStatus.COMPLETED

    # What the service received: the list, the payment with the forced note, and no deletion.
    assert [(method, path) for method, path, _, _ in service.received] == [
        ("GET", "/api/purchases"),
        ("POST", "/api/purchases/PO-1001/pay"),
    ]
    assert service.received[1][2] == {"amount": 1200.0, "note": "Paid per policy FIN-7"}
    assert {key for *_, key in service.received} == {"k-123"}, "the connector's secret header was sent"

    # What the run recorded.
    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked == {
        "tool_call_id": blocked["tool_call_id"],
        "tool": "oa__purchase_delete",
        "blocked_by": "deny_tools",
        "error": "Deleting purchases is not allowed.",
    }
    started = {e["tool"]: e for e in events_of(run, ev.TOOL_STARTED)}
    assert started["oa__purchase_pay"]["arguments"]["note"] == "Paid per policy FIN-7"
    finished = {e["tool"]: e for e in events_of(run, ev.TOOL_FINISHED)}
    listing = finished["oa__purchase_list"]["observation"]
    assert "DE89" not in listing and "GB29" not in listing and listing.count("[redacted]") == 2
    assert "PO-1001" in listing, "only the account numbers are redacted"
    effects = {(e["hook"], e["point"]) for e in events_of(run, ev.HOOK_SIDE_EFFECT)}
    assert {
        ("set_arguments", "PreToolUse"),
        ("redact_result", "PostToolUse"),
        ("deny_tools", "PreToolUse"),
    } <= effects
    audited = ToolExecution.objects.get(run=run, tool_name="oa__purchase_list").result
    assert audited[0]["account"] == PURCHASES[0]["account"], "the audit trail keeps the raw result"
    assert not ToolExecution.objects.filter(run=run, tool_name="oa__purchase_delete").exists()
