"""HTTP connector action tools against a real local service: the spec an action gives, what a call
sends (query string, JSON body, secret headers), how answers and failures come back, and that no
secret shows in an error."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from agents.models import Connector
from agents.tools.base import ToolError
from agents.tools.http import MAX_TEXT_CHARS
from tests.agents.tools_kit import RecordingServer, call, connector, http_tool, service
from tests.personas import Personas, make_http_connector

__all__ = ["connector", "service"]


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
