"""The OpenAI-compatible provider streaming from a local fake server: text deltas in order, parallel
tool calls reassembled from their chunks, and the request it sends."""

from __future__ import annotations

from typing import Any

from agents.llm.base import ToolCall
from tests.agents.openai_kit import (
    API_KEY,
    MESSAGES,
    Deltas,
    FakeChatServer,
    Reply,
    _no_openai_env,
    chunk,
    provider,
    server,
    text_reply,
)

__all__ = ["_no_openai_env", "server"]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "oa__purchase_list",
            "description": "List purchases",
            "parameters": {"type": "object", "properties": {"status": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "oa__purchase_pay",
            "description": "Pay a purchase",
            "parameters": {"type": "object", "properties": {"purchase_id": {"type": "integer"}}},
        },
    },
]


def tool_delta(index: int, *, id: str | None = None, name: str | None = None, args: str | None = None):
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    call: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        call.update(id=id, type="function")
    return chunk({"tool_calls": [call]})


async def test_it_streams_text_deltas_in_order(server: FakeChatServer) -> None:
    server.script(text_reply("Hel", "lo, ", "wor", "ld."))
    deltas = Deltas()

    response = await provider(server).complete(messages=MESSAGES, tools=[], on_delta=deltas)

    assert deltas.seen == ["Hel", "lo, ", "wor", "ld."]
    assert response.content == "Hello, world."
    assert response.tool_calls == []


async def test_it_reassembles_parallel_tool_calls_split_over_chunks(server: FakeChatServer) -> None:
    server.script(
        Reply(
            chunks=[
                chunk({"role": "assistant", "content": None}),
                tool_delta(0, id="call_a", name="oa__purchase_list", args=""),
                tool_delta(0, args='{"sta'),
                tool_delta(1, id="call_b", name="oa__purchase_pay", args='{"purch'),
                tool_delta(0, args='tus": "open"}'),
                tool_delta(1, args='ase_id": '),
                tool_delta(1, args="42}"),
                chunk({}, "tool_calls"),
            ]
        )
    )

    response = await provider(server, params={"temperature": 0.2, "max_tokens": 50}).complete(
        messages=MESSAGES, tools=TOOLS
    )

    assert response.content == ""
    assert response.tool_calls == [
        ToolCall("call_a", "oa__purchase_list", {"status": "open"}, '{"status": "open"}'),
        ToolCall("call_b", "oa__purchase_pay", {"purchase_id": 42}, '{"purchase_id": 42}'),
    ]
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body["model"] == "gpt-test"
    assert request.body["messages"] == MESSAGES
    assert request.body["tools"] == TOOLS
    assert request.body["stream"] is True
    assert request.body["temperature"] == 0.2
    assert request.body["max_tokens"] == 50


async def test_it_keeps_raw_arguments_when_tool_arguments_are_not_a_json_object(
    server: FakeChatServer,
) -> None:
    server.script(
        Reply(
            chunks=[
                tool_delta(0, id="call_a", name="oa__purchase_list", args="status: open"),
                tool_delta(1, id="call_b", name="oa__purchase_pay", args="[42]"),
                chunk({}, "tool_calls"),
            ]
        )
    )

    response = await provider(server).complete(messages=MESSAGES, tools=TOOLS)

    first, second = response.tool_calls
    assert (first.arguments, first.raw_arguments) == (None, "status: open")
    assert (second.arguments, second.raw_arguments) == (None, "[42]")


async def test_it_sends_no_tools_field_when_no_tools_are_offered(server: FakeChatServer) -> None:
    server.script(text_reply("ok"))

    await provider(server).complete(messages=MESSAGES, tools=[])

    assert "tools" not in server.requests[0].body
