"""The portal's "MCP clients" page: a person finds the gateways they may use, with the line to paste
into Claude Code, and makes or replaces their own API token, shown once."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

from mcp_gateway.server import caller_for
from tests.admin_kit import page_text
from tests.mcp_gateway.kit import make_gateway
from tests.personas import make_agent, make_user

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_member_finds_their_gateways_with_the_line_to_paste(personas) -> None:
    ours = make_gateway(make_agent(personas.org, personas.operator, name="Desk agent"))
    make_gateway(make_agent(personas.other_org, personas.stranger, name="Globex agent"))

    page = page_text(signed_in(personas.member).get(reverse("mcp_gateway:connect")))

    assert f"claude mcp add --transport http fimone http://testserver/mcp/{ours.key}/" in page
    assert "Desk agent" in page and "Globex agent" not in page
    assert "You have no token yet" in page
    # Claude Code's line, Cursor's settings and a program of the official SDK, each ready to copy.
    assert f'"url": "http://testserver/mcp/{ours.key}/"' in page
    assert f'URL, TOKEN = "http://testserver/mcp/{ours.key}/"' in page
    assert page.count('data-copy="') == 3 and "(Acme" not in page


def test_a_token_is_shown_once_and_replacing_it_refuses_the_old_one(personas) -> None:
    gateway = make_gateway(make_agent(personas.org, personas.operator))
    client = signed_in(personas.member)

    first = client.post(reverse("mcp_gateway:connect"))
    old = Token.objects.get(user=personas.member).key
    assert old in page_text(first) and "shown this once" in page_text(first)
    again = page_text(client.get(reverse("mcp_gateway:connect")))
    assert old not in again and "You have a token, made" in again

    # Replacing it is confirmed first: every client using it is refused from then on.
    unconfirmed = client.post(reverse("mcp_gateway:connect"))
    assert unconfirmed.status_code == 400 and "Your token was not replaced" in page_text(unconfirmed)
    assert Token.objects.get(user=personas.member).key == old

    replaced = client.post(reverse("mcp_gateway:connect"), {"confirm": "yes"})
    new = Token.objects.get(user=personas.member).key
    assert new != old and new in page_text(replaced)
    assert caller_for(old, gateway.key)[1] == 401
    assert caller_for(new, gateway.key)[1] == 200


def test_someone_who_reads_but_does_not_chat_is_offered_no_gateway(personas) -> None:
    make_gateway(make_agent(personas.org, personas.operator))
    auditor = make_user("audra", personas.org, "auditor")

    page = page_text(signed_in(auditor).get(reverse("mcp_gateway:connect")))

    assert "No gateway is open for you yet." in page


def test_the_page_asks_a_stranger_to_sign_in(client) -> None:
    response = client.get(reverse("mcp_gateway:connect"))

    assert response.status_code == 302 and "/login/" in response["Location"]
