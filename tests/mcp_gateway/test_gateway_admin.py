"""Gateways in the admin: an operator opens one on an agent of their organisation and reads its
address; another organisation's agents and gateways are out of reach; calls are read-only records."""

from __future__ import annotations

import pytest

from mcp_gateway.models import Gateway, GatewayCall
from mcp_gateway.services import gateway_call_start
from tests.admin_kit import logged_in, page_text, url
from tests.personas import make_agent

pytestmark = pytest.mark.django_db


def test_an_operator_opens_a_gateway_and_reads_how_to_connect(governed) -> None:
    agent = make_agent(governed.org, governed.operator, builtin_tools=["calculator"])
    client = logged_in(governed.operator)

    response = client.post(
        url(Gateway, "add"),
        {"organization": governed.org.pk, "agent": agent.pk, "name": "Desk", "enabled": "on"},
    )

    assert response.status_code == 302, page_text(response)
    gateway = Gateway.objects.get()
    assert gateway.created_by == governed.operator and len(gateway.key) >= 20
    page = page_text(client.get(url(Gateway, "change", gateway.pk)))
    assert f"/mcp/{gateway.key}/" in page and "claude mcp add --transport http" in page


def test_another_organisations_agent_cannot_be_put_behind_a_gateway(governed) -> None:
    theirs = make_agent(governed.other_org, governed.other_operator, name="Globex desk")

    response = logged_in(governed.operator).post(
        url(Gateway, "add"), {"organization": governed.org.pk, "agent": theirs.pk, "name": "Desk"}
    )

    assert response.status_code == 200 and not Gateway.objects.exists()


def test_another_organisations_gateway_answers_404(governed) -> None:
    theirs = Gateway.objects.create(
        organization=governed.other_org,
        agent=make_agent(governed.other_org, governed.other_operator),
        name="Globex",
    )

    response = logged_in(governed.operator).get(url(Gateway, "change", theirs.pk))

    assert response.status_code in (302, 404)
    assert theirs.key not in page_text(response)


def test_calls_are_listed_with_their_runs_and_nobody_edits_them(governed) -> None:
    agent = make_agent(governed.org, governed.operator, builtin_tools=["calculator"])
    gateway = Gateway.objects.create(organization=governed.org, agent=agent, name="Desk")
    call, _ = gateway_call_start(
        gateway=gateway, user=governed.member, tool_name="calculator", arguments={"expression": "1+1"}
    )
    client = logged_in(governed.operator)

    listing = page_text(client.get(url(GatewayCall, "changelist")))
    page = client.get(url(GatewayCall, "change", call.pk))

    assert "calculator" in listing and f"Run {call.run_id}" in listing
    assert page.status_code == 200 and 'name="_save"' not in page_text(page)
