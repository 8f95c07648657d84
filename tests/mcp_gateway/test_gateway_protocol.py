"""The gateway driven by the official SDK's client, as Claude Code would drive it: list the agent's
tools, call one through its hooks, wait for a person's approval, be refused."""

from __future__ import annotations

import asyncio
import importlib.metadata
import threading

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from agents.engine.journal import RunJournal
from agents.models import ExecutionPath, Run, RunStatus
from agents.signals import run_settled
from fimone import adb
from mcp_gateway import server
from tests.mcp_gateway.kit import make_gateway, mcp_client, run_async, served_gateway, token_of
from tests.personas import make_agent, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def desk(personas):
    agent = make_agent(personas.org, personas.operator, builtin_tools=["calculator", "current_time"])
    return make_gateway(agent)


def test_a_client_lists_the_agents_tools_and_calls_one(personas, desk) -> None:
    token = token_of(personas.member)
    with served_gateway() as base:

        async def session():
            async with mcp_client(base + desk.path, token) as client:
                tools = await client.list_tools()
                result = await client.call_tool("calculator", {"expression": "6*7"})
                return tools, result, client.server_info

        tools, result, server = run_async(session())

    assert sorted(t.name for t in tools.tools) == ["calculator", "current_time"]
    # Clients show tools by their titles, and the server by its name and version.
    assert sorted(t.title for t in tools.tools) == ["Calculator", "Current time"]
    assert server.name == "fimone-gateway" and server.version == importlib.metadata.version("fimone-hooks")
    assert not result.is_error and "42" in result.content[0].text
    run = Run.objects.get()
    assert run.execution_path == ExecutionPath.MCP and run.status == RunStatus.COMPLETED
    assert run.user == personas.member


def test_a_client_is_answered_once_the_runs_ending_is_written_not_once_its_stream_is_flushed(
    personas, desk, monkeypatch
) -> None:
    """The run's last events leave for its stream after the client has its answer: a stream held
    up (Redis slow or away) never holds up the client."""
    released = threading.Event()
    flushes: list[str] = []

    async def held_flush(self) -> None:
        flushes.append("waiting")
        await asyncio.to_thread(released.wait, 60)

    monkeypatch.setattr(RunJournal, "flush_stream", held_flush)
    token = token_of(personas.member)
    with served_gateway() as base:

        async def call():
            async with mcp_client(base + desk.path, token) as client:
                return await asyncio.wait_for(client.call_tool("calculator", {"expression": "6*7"}), 15)

        try:
            result = run_async(call())
            assert flushes == ["waiting"], "answered while the run's stream was still being flushed"
        finally:
            released.set()

    assert not result.is_error and "42" in result.content[0].text
    assert Run.objects.get().status == RunStatus.COMPLETED


@pytest.mark.postgres  # elsewhere the ending's transaction tells them as it commits (run_finish)
def test_a_client_is_answered_once_the_runs_ending_is_written_not_once_higher_apps_heard_of_it(
    personas, desk
) -> None:
    """A run's ending is written on the event loop; ``run_settled`` (workflows and evals listen)
    is told after it, in the database thread. The client does not wait for its receivers."""
    released = threading.Event()
    heard: list[str] = []

    def slow_receiver(sender, run_id, status, **kwargs) -> None:
        heard.append(status)
        released.wait(60)

    run_settled.connect(slow_receiver, dispatch_uid="test.slow_receiver")
    token = token_of(personas.member)
    try:
        with served_gateway() as base:

            async def call():
                async with mcp_client(base + desk.path, token) as client:
                    # Listed first: the client checks a structured result against the listing,
                    # which is read in the database thread the receiver holds.
                    await client.list_tools()
                    return await asyncio.wait_for(client.call_tool("calculator", {"expression": "6*7"}), 15)

            try:
                result = run_async(call())
                assert not released.is_set(), "answered only once the receivers were done"
            finally:
                released.set()
    finally:
        run_settled.disconnect(dispatch_uid="test.slow_receiver")

    assert not result.is_error and "42" in result.content[0].text
    assert heard == [RunStatus.COMPLETED]


def test_calls_after_a_listing_do_not_read_the_agents_tools_again_for_the_sdk(
    personas, desk, monkeypatch
) -> None:
    """The SDK checks a call's ``Mcp-Param-*`` headers against the tool's input schema: the gateway
    hands it the schema it listed, rather than the SDK listing every tool before every call."""

    listed: list[int] = []
    real = server._tools_of
    monkeypatch.setattr(server, "_tools_of", lambda caller: listed.append(1) or real(caller))
    token = token_of(personas.member)
    with served_gateway() as base:

        async def session():
            async with mcp_client(base + desk.path, token) as client:
                await client.list_tools()
                return [await client.call_tool("calculator", {"expression": f"{n}+1"}) for n in range(3)]

        results = run_async(session())

    assert not any(r.is_error for r in results)
    assert [str(n + 1) in r.content[0].text for n, r in enumerate(results)] == [True, True, True]
    assert len(listed) == 1, "one listing, for the client's tools/list"
    assert server.listed_input_schema("calculator") is None, "outside a request there is no caller"
    assert Run.objects.filter(status=RunStatus.COMPLETED).count() == 3


# --- who may call -----------------------------------------------------------------------------------


def _status(url: str, token: str | None) -> int:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    return httpx.post(
        url, json=body, headers={**headers, "Accept": "application/json, text/event-stream"}
    ).status_code


def test_who_may_not_call_is_told_so_before_anything_is_read(personas, desk) -> None:
    auditor = make_user("audra", personas.org, "auditor")
    tokens = {
        who: token_of(user)
        for who, user in [("member", personas.member), ("stranger", personas.stranger), ("auditor", auditor)]
    }
    with served_gateway() as base:
        url = base + desk.path
        assert _status(url, None) == 401
        assert _status(url, "not-a-token") == 401
        assert _status(url, tokens["stranger"]) == 404, (
            "another organisation's gateway does not exist for them"
        )
        assert _status(url, tokens["auditor"]) == 403
        assert _status(base + "/mcp/unknown-key-000/", tokens["member"]) == 404
        desk.enabled = False
        desk.save()
        assert _status(url, tokens["member"]) == 404


def _caller_world(personas, desk) -> dict[str, tuple[str, str]]:
    """``{case: (token, key)}``: every way a caller can be let in or turned away."""
    inactive = make_user("ida", personas.org, is_active=False)
    superuser = make_user("suzy", personas.org, "auditor", is_superuser=True)
    archived = make_gateway(make_agent(personas.org, personas.operator, builtin_tools=["calculator"]))
    archived.agent.archived_at = timezone.now()
    archived.agent.save()
    switched_off = make_gateway(make_agent(personas.org, personas.operator, builtin_tools=["calculator"]))
    switched_off.enabled = False
    switched_off.save()
    member = token_of(personas.member)
    return {
        "a member": (member, desk.key),
        "an auditor": (token_of(personas.auditor), desk.key),
        "a superuser whose only role is auditor": (token_of(superuser), desk.key),
        "another organisation's member": (token_of(personas.stranger), desk.key),
        "a deactivated user": (token_of(inactive), desk.key),
        "an unknown token": ("0" * 40, desk.key),
        "an unknown key": (member, "unknown-key-000"),
        "an archived agent's gateway": (member, archived.key),
        "a switched-off gateway": (member, switched_off.key),
    }


@pytest.mark.postgres
def test_the_loop_and_the_thread_let_in_and_turn_away_the_same_callers(personas, desk) -> None:
    """On PostgreSQL the caller is read on the event loop in one statement; elsewhere through the
    ORM. Both go through the same checks (``services.check_gateway_caller``) and must agree."""

    async def on_loop(token: str, key: str):
        try:
            return await server.caller_for_on_loop(token, key)
        finally:
            await adb.close()

    seen = {}
    for case, (token, key) in _caller_world(personas, desk).items():
        thread = server.caller_for(token, key)
        loop = async_to_sync(on_loop)(token, key)
        assert loop[1:] == thread[1:], case
        if thread[0] is not None:
            assert (loop[0].user.pk, loop[0].gateway.pk) == (thread[0].user.pk, thread[0].gateway.pk), case
            assert loop[0].gateway.agent.organization == thread[0].gateway.agent.organization
        seen[case] = thread[1]

    assert seen == {
        "a member": 200,
        "an auditor": 403,
        "a superuser whose only role is auditor": 200,
        "another organisation's member": 404,
        "a deactivated user": 401,
        "an unknown token": 401,
        "an unknown key": 404,
        "an archived agent's gateway": 404,
        "a switched-off gateway": 404,
    }
