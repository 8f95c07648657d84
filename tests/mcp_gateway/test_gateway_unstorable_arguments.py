"""A gateway call whose arguments a database cannot store (NaN, ±Infinity, a NUL character) is
answered with a tool error naming the field, in words: never a database's message, never a 500.
Nothing is stored and no run starts (docs/design.md §1.16).

The SDK's client writes NaN as ``null``, so these calls are sent as the raw JSON a client could
send (Python's ``json.dumps`` writes NaN and Infinity by default); the SDK's server parses them."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agents.models import Run
from mcp_gateway.models import GatewayCall
from tests.mcp_gateway.kit import make_gateway, served_gateway, token_of
from tests.personas import make_action, make_agent, make_http_connector

pytestmark = pytest.mark.django_db(transaction=True)


PAY_SCHEMA = {
    "type": "object",
    "properties": {
        "purchase_id": {"type": "string"},
        "amount": {"type": "number"},
        "note": {"type": "string"},
        "lines": {"type": "array", "items": {"type": "object"}},
        "meta": {"type": "object"},
    },
    "required": ["purchase_id"],
}


@pytest.fixture
def desk(personas):
    """An agent that pays purchases (an HTTP action that is never reached here) and calculates."""
    erp = make_http_connector(personas.org, "https://erp.example.test", slug="erp")
    pay = make_action(erp, "pay", method="POST", path="/pay", parameters_schema=PAY_SCHEMA)
    agent = make_agent(personas.org, personas.operator, builtin_tools=["calculator"], actions=[pay])
    return make_gateway(agent)


def raw_call(url: str, token: str, body: str) -> dict[str, Any]:
    """The JSON-RPC answer to ``body`` (a ``tools/call`` written by hand), read off its stream."""
    response = httpx.post(
        url,
        content=body.encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        timeout=30,
    )
    assert response.status_code == 200, response.text
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    messages = [json.loads(d) for d in data if d]
    [answer] = [m for m in messages if m.get("id") == 1]
    return answer


def call_body(arguments_json: str, tool: str = "erp__pay") -> str:
    return (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
        f'"params": {{"name": "{tool}", "arguments": {arguments_json}}}}}'
    )


def tool_error(personas, desk, arguments_json: str) -> str:
    with served_gateway() as base:
        answer = raw_call(base + desk.path, token_of(personas.member), call_body(arguments_json))
    assert "result" in answer, answer
    result = answer["result"]
    assert result["isError"] is True, result
    return result["content"][0]["text"]


def assert_nothing_stored() -> None:
    assert not GatewayCall.objects.exists()
    assert not Run.objects.exists()


def test_a_gateway_call_with_nan_is_answered_naming_the_field(personas, desk) -> None:
    text = tool_error(personas, desk, '{"purchase_id": "PO-1", "amount": NaN}')

    assert text == "Refused: invalid arguments for erp__pay: amount is not a finite number"
    assert_nothing_stored()


def test_a_gateway_call_with_infinity_deep_in_its_arguments_is_answered_naming_the_path(
    personas, desk
) -> None:
    text = tool_error(
        personas, desk, '{"purchase_id": "PO-1", "lines": [{"amount": 1}, {"amount": -Infinity}]}'
    )

    assert text == "Refused: invalid arguments for erp__pay: lines.1.amount is not a finite number"
    assert_nothing_stored()


def test_a_gateway_call_with_a_nul_character_is_answered_naming_the_field(personas, desk) -> None:
    text = tool_error(personas, desk, '{"purchase_id": "PO-1", "note": "a\\u0000b"}')

    assert text == "Refused: invalid arguments for erp__pay: note contains a NUL character"
    assert_nothing_stored()


def test_a_gateway_call_with_a_nul_character_in_a_key_is_answered_in_words(personas, desk) -> None:
    text = tool_error(personas, desk, '{"purchase_id": "PO-1", "meta": {"a\\u0000b": 1}}')

    assert text == "Refused: invalid arguments for erp__pay: a key of meta contains a NUL character"
    assert_nothing_stored()


def test_a_gateway_call_with_ordinary_arguments_still_runs(personas, desk) -> None:
    with served_gateway() as base:
        answer = raw_call(
            base + desk.path, token_of(personas.member), call_body('{"expression": "6*7"}', "calculator")
        )

    assert answer["result"]["isError"] is False and "42" in answer["result"]["content"][0]["text"]


def test_a_gateway_call_to_a_tool_name_with_a_nul_character_is_answered_in_words(personas, desk) -> None:
    with served_gateway() as base:
        answer = raw_call(base + desk.path, token_of(personas.member), call_body("{}", "erp\\u0000pay"))

    assert answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"] == (
        "Refused: invalid call: the tool's name contains a NUL character"
    )
    assert_nothing_stored()
