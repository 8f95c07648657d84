"""The MCP gateway's part of the demo (``agents.demo``): a gateway to the demo agent, and an API
token for alice, so that an MCP client can call the agent's tools at once."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from agents.models import Agent
from mcp_gateway.models import Gateway
from tenancy.models import Organization

DEMO_GATEWAY_NAME = "Procurement desk"
DEMO_CALLER = "alice"


def demo_gateway_seed(sender: Any, *, organization: Organization, agent: Agent, **kwargs: Any) -> str | None:
    """Receiver of ``agents.demo.demo_seeded``: the demo agent's gateway (its address kept from one
    reset to the next) and alice's API token. Returns the line ``demo_setup`` prints."""
    gateway, _ = Gateway.objects.update_or_create(
        organization=organization, name=DEMO_GATEWAY_NAME, defaults={"agent": agent, "enabled": True}
    )
    caller = get_user_model().objects.filter(username=DEMO_CALLER).first()
    if caller is None:
        return f"MCP gateway: {gateway.path}"
    token, _ = Token.objects.get_or_create(user=caller)
    return f"MCP gateway: {gateway.path}  (as {DEMO_CALLER}: Authorization: Bearer {token.key})"
