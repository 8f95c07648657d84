"""A client's session reads as one conversation: a person's calls through one gateway join the
conversation of their previous call while each follows the one before within ``SESSION_IDLE``;
one turn per call, calls may overlap, and nobody else's calls ever join."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.models import Conversation, Run, RunStatus
from agents.services import conversation_archive
from mcp_gateway import services
from mcp_gateway.models import GatewayCall
from tests.admin_kit import page_text
from tests.mcp_gateway.kit import make_gateway
from tests.personas import make_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def desk(personas):
    agent = make_agent(personas.org, personas.operator, name="Desk agent", builtin_tools=["calculator"])
    return make_gateway(agent)


def call(gateway: Any, user: Any, expression: str) -> GatewayCall:
    made, fresh = services.gateway_call_start(
        gateway=gateway, user=user, tool_name="calculator", arguments={"expression": expression}
    )
    assert fresh
    return made


def conversation_of(made: GatewayCall) -> int:
    return Run.objects.get(pk=made.run_id).conversation_id


def test_a_clients_calls_in_one_session_are_one_conversation_one_turn_each(personas, desk) -> None:
    first, second, third = (call(desk, personas.member, e) for e in ("1+1", "2+2", "3+3"))

    assert conversation_of(first) == conversation_of(second) == conversation_of(third)
    conversation = Conversation.objects.get(pk=conversation_of(first))
    assert conversation.title.startswith("Calculator (1+1) — an MCP call through")
    assert list(conversation.runs.order_by("pk").values_list("input", flat=True)) == [
        f"Calculator ({e}) — an MCP call through {desk.name}" for e in ("1+1", "2+2", "3+3")
    ]


def test_calls_of_one_session_may_run_at_the_same_time(personas, desk) -> None:
    first = call(desk, personas.member, "1+1")
    Run.objects.filter(pk=first.run_id).update(status=RunStatus.AWAITING_APPROVAL)

    second = call(desk, personas.member, "2+2")  # a chat would be refused here; a client is not

    assert conversation_of(second) == conversation_of(first)


def test_a_call_after_the_session_went_quiet_opens_a_new_conversation(personas, desk) -> None:
    first = call(desk, personas.member, "1+1")
    # Well past the idle time, never at its edge.
    GatewayCall.objects.filter(pk=first.pk).update(created_at=timezone.now() - services.SESSION_IDLE * 3)

    later = call(desk, personas.member, "2+2")

    assert conversation_of(later) != conversation_of(first)


def test_an_archived_conversation_is_never_joined(personas, desk) -> None:
    first = call(desk, personas.member, "1+1")
    Run.objects.filter(pk=first.run_id).update(status=RunStatus.COMPLETED)
    conversation_archive(
        conversation=Conversation.objects.get(pk=conversation_of(first)), user=personas.member
    )

    later = call(desk, personas.member, "2+2")

    assert conversation_of(later) != conversation_of(first)
    assert Conversation.objects.get(pk=conversation_of(later)).archived_at is None


def test_nobody_elses_calls_and_no_other_gateways_calls_join(personas, desk) -> None:
    mine = call(desk, personas.member, "1+1")
    colleagues = call(desk, personas.approver, "1+1")
    other_desk = make_gateway(desk.agent, name="Second desk")
    elsewhere = call(other_desk, personas.member, "1+1")

    conversations = {conversation_of(made) for made in (mine, colleagues, elsewhere)}
    assert len(conversations) == 3
    assert Conversation.objects.get(pk=conversation_of(colleagues)).user == personas.approver


def test_the_list_shows_a_session_once_with_its_number_of_calls(personas, desk) -> None:
    for expression in ("1+1", "2+2"):
        call(desk, personas.member, expression)
    client = Client()
    client.force_login(personas.member)

    listing = page_text(client.get(reverse("portal:conversations")))

    assert listing.count("an MCP call through") == 1
    assert "2 calls from an MCP client" in listing
