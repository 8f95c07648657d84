"""A gateway call is a run like any other: in the caller's conversations in the portal, with its
tool call; in the admin's runs; in the audit of tool calls."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agents import events as ev
from agents.models import ExecutionPath, Run, RunStatus
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

    assert "MCP call through" in page_text(listing)
    assert page.status_code == 200 and "calculator" in page_text(page)


def test_the_calls_conversation_is_a_record_not_a_chat_to_continue(personas, done) -> None:
    client = Client()
    client.force_login(personas.member)
    address = reverse("portal:conversation", args=[done.run.conversation_id])

    response = client.get(address)
    assert 'id="composer"' not in response.content.decode()  # nothing to write in
    assert "records a tool call an MCP client made through the agent's gateway" in page_text(response)

    answer = client.post(address, {"message": "and now pay it"}, follow=True)
    assert "Not sent: this conversation records a tool call made through an MCP gateway" in page_text(answer)
    assert Run.objects.filter(conversation_id=done.run.conversation_id).count() == 1


def test_the_run_is_on_the_record_with_its_path_and_its_tool_call(personas, governed, done) -> None:
    run = Run.objects.get(pk=done.run_id)
    assert run.execution_path == ExecutionPath.MCP and run.user == personas.member
    [finished] = events_of(run, ev.TOOL_FINISHED)
    assert finished["tool"] == "calculator" and '"value": 42' in finished["observation"]
    answer = gateway_call_answer(call_id=done.pk)
    assert answer is not None and not answer.is_error and answer.structured["value"] == 42

    listing = page_text(logged_in(governed.auditor).get(url(Run, "changelist") + "?execution_path=mcp"))
    assert "Desk agent" in listing
