"""A gated tool through the gateway: the client waits, told so by progress notifications, and
receives the result once a person approved in the inbox, or an error naming the refusal; an
answer that never reached its client is given again, never run twice. The agent's tools here
are themselves an MCP server's (the records server over stdio): MCP on both sides."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.urls import reverse

from agents.models import ConnectorAction, Run, RunStatus
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from fimone import adb
from mcp_gateway import services
from mcp_gateway.models import GatewayCall
from mcp_gateway.server import _base_url_of
from mcp_gateway.services import gateway_call_start
from tests.agents.archiving_race import a_start_waits_on_a_lock
from tests.agents.mcp_kit import ToolboxHarness, calls_of, listed, stdio_connector
from tests.approvals.kit import set_policy
from tests.mcp_gateway.kit import (
    HOLD_SECONDS,
    HeldAfterLookup,
    Waiting,
    make_gateway,
    mcp_client,
    run_async,
    served_gateway,
    token_of,
    until,
)
from tests.personas import make_agent, make_hook

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "records.jsonl"


@pytest.fixture
def desk(personas, log):
    records = stdio_connector(personas.org, log)
    listed(records)
    agent = make_agent(personas.org, personas.operator)
    agent.actions.set(records.actions.all())
    set_policy(personas)
    return make_gateway(agent)


def settle(resumes, waiting: Waiting, timeout: float = 60) -> None:
    """Resume what the verdict asks to, until the waiting client has its answer. A verdict may
    land before the run is parked: the run then asks for its own resume once it is (the
    journal's park), after the decision returned."""
    deadline = time.monotonic() + timeout
    while waiting.thread.is_alive() and time.monotonic() < deadline:
        while resumes.run_ids:
            ToolboxHarness().resume(Run.objects.get(pk=resumes.run_ids.pop(0)))
        waiting.thread.join(0.05)


def test_a_gated_call_waits_for_approval_and_returns_the_result(
    personas, desk, log, resumes, settings
) -> None:
    settings.SITE_URL_FROM_REQUEST = True  # development: links on the address the client used
    token = token_of(personas.member)
    with served_gateway() as base:
        waiting = Waiting(base + desk.path, token, "records__delete_record", {"record_id": "r-2"})
        request = until(lambda: ConfirmationRequest.objects.first())
        until(lambda: waiting.progress)
        assert calls_of(log, "delete_record") == [], "nothing runs before the verdict"

        confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
        settle(resumes, waiting)
        result = waiting.join()

    assert not result.is_error and result.structured_content == {"result": "deleted r-2"}
    # The client's person is told until when, and where to follow it: their conversation's page,
    # not the request's internal id.
    page = base + reverse("portal:conversation", args=[request.run.conversation_id])
    told = waiting.progress[0]
    assert told.startswith(f"{request.tool_title}: waiting for a person's approval until ")
    assert str(request.pk) not in told and "records__" not in told
    assert told.endswith(f"; follow it at {page}")
    assert calls_of(log, "delete_record") == [{"record_id": "r-2"}]
    call = GatewayCall.objects.get()
    assert call.run.status == RunStatus.COMPLETED and call.delivered_at is not None
    assert request.run == call.run


def test_a_client_hears_its_call_waits_for_approval_while_the_run_waits_inline(
    personas, desk, log, resumes, monkeypatch
) -> None:
    monkeypatch.setattr("mcp_gateway.server.PROGRESS_SECONDS", 0.2)
    set_policy(personas, inline_wait_seconds=120)  # the run holds its place instead of parking
    token = token_of(personas.member)
    with served_gateway() as base:
        waiting = Waiting(base + desk.path, token, "records__delete_record", {"record_id": "r-2"})
        request = until(lambda: ConfirmationRequest.objects.first())
        until(lambda: any("waiting for a person's approval" in told for told in waiting.progress))
        assert Run.objects.get(pk=request.run_id).status == RunStatus.RUNNING, "not parked: inline"
        # (The first word may come before the gate asked: "running" then is true.)
        assert not any(told.endswith(": running") for told in waiting.progress[1:])

        confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
        result = waiting.join()

    assert not result.is_error and result.structured_content == {"result": "deleted r-2"}
    assert calls_of(log, "delete_record") == [{"record_id": "r-2"}]  # woken where it waited, once


def test_a_rejected_call_is_an_error_naming_the_refusal(personas, desk, log, resumes) -> None:
    token = token_of(personas.member)
    with served_gateway() as base:
        waiting = Waiting(base + desk.path, token, "records__delete_record", {"record_id": "r-2"})
        request = until(lambda: ConfirmationRequest.objects.first())
        confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="keep it")
        settle(resumes, waiting)
        result = waiting.join()

    assert result.is_error
    text = result.content[0].text
    # The person's verdict in the gate's words; the hook's internal name is nobody's business.
    assert text.startswith("Refused: Rejected by ") and "keep it" in text and "confirmation_gate" not in text
    assert calls_of(log, "delete_record") == []


def test_a_blocking_hook_refuses_before_anyone_is_asked(personas, desk, log) -> None:
    make_hook(personas.org, "deny_tools", params={"tools": ["records__*"], "message": "Records are frozen."})
    token = token_of(personas.member)
    with served_gateway() as base:

        async def session():
            async with mcp_client(base + desk.path, token) as client:
                return await client.call_tool("records__delete_record", {"record_id": "r-1"})

        result = run_async(session())

    assert result.is_error
    assert result.content[0].text == "Refused by a safety rule of this agent: Records are frozen."
    assert not ConfirmationRequest.objects.exists() and calls_of(log, "delete_record") == []


def test_an_unknown_tool_or_bad_arguments_are_errors_the_client_reads(personas, desk, log) -> None:
    ConnectorAction.objects.filter(remote_name="lookup").update(requires_confirmation=False)
    token = token_of(personas.member)
    with served_gateway() as base:

        async def session():
            async with mcp_client(base + desk.path, token) as client:
                unknown = await client.call_tool("records__nope", {})
                bad = await client.call_tool("records__lookup", {"record_id": 7})
                return unknown, bad

        unknown, bad = run_async(session())

    assert unknown.is_error and "Unknown tool 'records__nope'" in unknown.content[0].text
    assert bad.is_error and "Invalid arguments for records__lookup" in bad.content[0].text
    assert calls_of(log, "lookup") == []


def test_an_answer_that_never_reached_its_client_is_given_again_not_run_again(personas, desk, log) -> None:
    ConnectorAction.objects.filter(remote_name="delete_record").update(requires_confirmation=False)
    # A client's first call ran, then its connection died before the answer went out.
    first, fresh = gateway_call_start(
        gateway=desk, user=personas.member, tool_name="records__delete_record", arguments={"record_id": "r-1"}
    )
    assert fresh
    ToolboxHarness().execute(first.run)
    token = token_of(personas.member)

    with served_gateway() as base:

        async def session():
            async with mcp_client(base + desk.path, token) as client:
                again = await client.call_tool("records__delete_record", {"record_id": "r-1"})
                once_more = await client.call_tool("records__delete_record", {"record_id": "r-1"})
                return again, once_more

        again, once_more = run_async(session())

    assert again.structured_content == once_more.structured_content == {"result": "deleted r-1"}
    runs = [call.run_id for call in GatewayCall.objects.order_by("pk")]
    assert runs[0] == first.run_id and len(runs) == 2, "the retry was answered from the first run"
    assert len(calls_of(log, "delete_record")) == 2, "once for the call, once for the new call after delivery"


def test_calls_past_the_run_start_budget_are_refused_and_start_nothing(personas, desk, log, settings) -> None:
    from agents.models import Run

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"run_start": "2/min"}}
    ConnectorAction.objects.filter(remote_name="lookup").update(requires_confirmation=False)
    token = token_of(personas.member)
    with served_gateway() as base:

        async def session():
            async with mcp_client(base + desk.path, token) as client:
                return [await client.call_tool("records__lookup", {"record_id": f"r-{i}"}) for i in (1, 2, 1)]

        first, second, third = run_async(session())

    assert not first.is_error and not second.is_error
    assert third.is_error and "Refused:" in third.content[0].text and "try again in" in third.content[0].text
    assert Run.objects.count() == 2


def test_the_progress_link_starts_with_the_public_address_once_one_is_set(settings) -> None:
    scope = {"scheme": "http", "headers": [(b"host", b"laptop.local:8765")]}
    settings.SITE_URL_FROM_REQUEST, settings.SITE_URL = False, "https://fimone.example.com"
    assert _base_url_of(scope) == "https://fimone.example.com"  # production: never the Host sent
    settings.SITE_URL_FROM_REQUEST = True
    assert _base_url_of(scope) == "http://laptop.local:8765"  # development: where the client came in
    assert _base_url_of({"scheme": "http", "headers": []}) == settings.SITE_URL


def test_two_identical_calls_at_the_same_moment_run_the_tool_once_and_both_are_answered(
    personas, desk, log, resumes, monkeypatch
) -> None:
    """A client that retries without waiting for its first call (or two of its sessions) calls
    twice at the same moment: one run, one execution of the tool, the same answer to both."""
    releaser = None
    if adb.available():
        # The server starts calls on its event loop, together: hold the first one after its retry
        # lookup until the second got as far as it may. (Elsewhere the calls' starts take turns in
        # the database thread, each a transaction holding SQLite's one write lock.)
        releaser = HeldAfterLookup(monkeypatch, services).let_go_in_thread(a_start_waits_on_a_lock)
    token = token_of(personas.member)
    with served_gateway() as base:
        clients = [
            Waiting(base + desk.path, token, "records__delete_record", {"record_id": "r-3"}) for _ in range(2)
        ]
        request = until(lambda: ConfirmationRequest.objects.first())
        until(lambda: all(client.progress for client in clients))  # both wait for their answer
        assert Run.objects.count() == 1 and GatewayCall.objects.count() == 1, "one call, one run"

        confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
        for client in clients:
            settle(resumes, client)
        results = [client.join() for client in clients]
    if releaser is not None:
        releaser.join(HOLD_SECONDS)

    assert [r.structured_content for r in results] == [{"result": "deleted r-3"}] * 2
    assert not any(r.is_error for r in results)
    assert calls_of(log, "delete_record") == [{"record_id": "r-3"}], "the tool ran once"
    assert ConfirmationRequest.objects.count() == 1
