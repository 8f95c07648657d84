"""A gateway call is a run like any other: in the caller's conversations in the portal, with its
tool call; in the admin's runs; in the audit of tool calls."""

from __future__ import annotations

import datetime as dt

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents import events as ev
from agents.models import ExecutionPath, Run, RunEvent, RunStatus
from agents.services import run_start, runs_reclaim_expired
from fimone import adb
from mcp_gateway import services
from mcp_gateway.models import GatewayCall
from mcp_gateway.services import gateway_call_answer, gateway_call_start
from tests.admin_kit import logged_in, page_text, url
from tests.agents.engine_kit import events_of
from tests.agents.mcp_kit import ToolboxHarness
from tests.mcp_gateway.kit import make_gateway
from tests.personas import make_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def done(personas):
    agent = make_agent(personas.org, personas.operator, name="Desk agent", builtin_tools=["calculator"])
    gateway = make_gateway(agent)
    call, _ = gateway_call_start(
        gateway=gateway, user=personas.member, tool_name="calculator", arguments={"expression": "6*7"}
    )
    assert ToolboxHarness().execute(call.run) == RunStatus.COMPLETED
    return call


def test_the_caller_finds_the_call_among_their_conversations(personas, done) -> None:
    client = Client()
    client.force_login(personas.member)

    listing = client.get(reverse("portal:conversations"))
    page = client.get(reverse("portal:conversation", args=[done.run.conversation_id]))

    # Listed and titled by the tool as people read it, not by its internal name and raw JSON.
    title = f"Calculator (6*7) — an MCP call through {done.gateway.name}"
    assert title in page_text(listing) and '{"expression"' not in page_text(listing)
    assert page.status_code == 200 and title in page_text(page)


def test_the_calls_conversation_is_a_record_not_a_chat_to_continue(personas, done) -> None:
    client = Client()
    client.force_login(personas.member)
    address = reverse("portal:conversation", args=[done.run.conversation_id])

    response = client.get(address)
    assert 'id="composer"' not in response.content.decode()  # nothing to write in
    assert "records the calls an MCP client made through the agent's gateway" in page_text(response)

    answer = client.post(address, {"message": "and now pay it"}, follow=True)
    assert "Not sent: this conversation records calls made through an MCP gateway" in page_text(answer)
    assert Run.objects.filter(conversation_id=done.run.conversation_id).count() == 1


def test_the_calls_step_is_named_as_people_read_the_tool(done) -> None:
    # As a model's proposal is (events.TOOL_PROPOSED): the page names the step by its title.
    [proposed] = events_of(Run.objects.get(pk=done.run_id), ev.TOOL_PROPOSED)
    assert (proposed["tool"], proposed["title"]) == ("calculator", "Calculator")


def test_the_run_is_on_the_record_with_its_path_and_its_tool_call(personas, governed, done) -> None:
    run = Run.objects.get(pk=done.run_id)
    assert run.execution_path == ExecutionPath.MCP and run.user == personas.member
    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert finished["tool"] == "calculator" and '"value": 42' in finished["observation"]
    answer = gateway_call_answer(call_id=done.pk)
    assert answer is not None and not answer.is_error and answer.structured["value"] == 42

    listing = page_text(logged_in(governed.auditor).get(url(Run, "changelist") + "?execution_path=mcp"))
    assert "Desk agent" in listing


def test_a_call_whose_server_died_before_driving_it_runs_once_its_lease_runs_out(personas, resumes) -> None:
    """The gateway creates a call's run with its own lease, to drive it at once without a claim.
    A server that dies in between leaves a running run nobody drives: when the lease runs out,
    the sweep resumes it like any run whose worker died, and the call runs, once."""
    agent = make_agent(personas.org, personas.operator, name="Desk agent", builtin_tools=["calculator"])
    call, fresh = gateway_call_start(
        gateway=make_gateway(agent),
        user=personas.member,
        tool_name="calculator",
        arguments={"expression": "6*7"},
        claimed_by="web.1:4242:gone",
    )
    run = Run.objects.get(pk=call.run_id)
    assert fresh and run.status == RunStatus.RUNNING and run.lease_owner == "web.1:4242:gone"
    assert run.started_at is not None and gateway_call_answer(call_id=call.pk) is None
    harness = ToolboxHarness()
    assert harness.execute(run) is None, "nobody else claims a run whose lease holds"

    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert runs_reclaim_expired() == 1 and resumes.run_ids == [run.pk]
    assert harness.resume(run, "the previous worker stopped") == RunStatus.COMPLETED

    answer = gateway_call_answer(call_id=call.pk)
    assert answer is not None and not answer.is_error and "42" in answer.text
    assert len(events_of(run, ev.TOOL_FINISHED)) == 1  # it ran once


def test_a_run_claimed_at_its_start_is_never_also_dispatched(personas) -> None:
    agent = make_agent(personas.org, personas.operator)
    with pytest.raises(ValueError):
        run_start(agent=agent, user=personas.member, input="hi", dispatch=True, claimed_by="web.1:1:x")
    assert not Run.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)  # the loop's statement runs on a connection of its own
def test_the_loop_and_the_thread_answer_a_client_alike_and_mark_only_an_ended_call_delivered(
    personas,
) -> None:
    """On PostgreSQL the answer is read and the call marked delivered in one statement on the
    event loop; elsewhere through the ORM. Both go through the same rules (``services.answer_of``)."""
    agent = make_agent(personas.org, personas.operator, builtin_tools=["calculator"])
    gateway = make_gateway(agent)

    def call_whose_run(status: str, **fields) -> GatewayCall:
        arguments = {"n": status + str(fields)}
        call, _ = services.gateway_call_start(
            gateway=gateway, user=personas.member, tool_name="calculator", arguments=arguments
        )
        Run.objects.filter(pk=call.run_id).update(status=status, **fields)
        return call

    refused = call_whose_run(RunStatus.FAILED, error="blocked")
    RunEvent.objects.create(
        run_id=refused.run_id,
        seq=1,
        type=ev.TOOL_BLOCKED,
        payload={"tool_call_id": refused.tool_call_id, "blocked_by": "no_deletes", "error": "not Fridays"},
    )
    calls = {
        "completed": call_whose_run(RunStatus.COMPLETED, output='{"total": 42}'),
        "refused": refused,
        "failed": call_whose_run(RunStatus.FAILED, error="the tool failed"),
        "cancelled": call_whose_run(RunStatus.CANCELLED, error="cancelled by the user"),
        "waiting": call_whose_run(RunStatus.AWAITING_APPROVAL),
    }

    async def on_loop(call_id: int):
        try:
            async with adb.connection() as connection:
                return await services.gateway_call_answer_delivered_async(connection, call_id=call_id)
        finally:
            await adb.close()

    answers = {}
    for case, call in calls.items():
        thread = services.gateway_call_answer(call_id=call.pk)
        assert not GatewayCall.objects.get(pk=call.pk).delivered_at
        loop = async_to_sync(on_loop)(call.pk)
        assert loop == thread, case
        delivered = GatewayCall.objects.get(pk=call.pk).delivered_at is not None
        assert delivered == (thread is not None), case
        answers[case] = thread

    assert answers["completed"] == services.Answer('{"total": 42}', is_error=False, structured={"total": 42})
    refused = services.Answer("Refused by a safety rule of this agent: not Fridays", is_error=True)
    assert answers["refused"] == refused
    assert answers["failed"] == services.Answer("the tool failed", is_error=True)
    cancelled = services.Answer("The call was cancelled: cancelled by the user", is_error=True)
    assert answers["cancelled"] == cancelled
    assert answers["waiting"] is None
