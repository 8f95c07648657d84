"""MCP gateways: one agent's tools offered to any MCP client, behind the agent's hooks and gate.

A :class:`Gateway` is reached at ``/mcp/<key>/`` (Streamable HTTP) with a person's API token;
each ``tools/call`` it answers is a :class:`GatewayCall`, carried out as a run of the agent
(``execution_path="mcp"``) whose one tool call is the client's. Neither is ever deleted while it
has history: a gateway is switched off instead (its calls and their runs stay readable).
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from agents.models import Agent, Run
from tenancy.models import organisation_key


def new_gateway_key() -> str:
    """A key for a gateway's address: unguessable, and safe in a URL path."""
    return secrets.token_urlsafe(18)


class Gateway(models.Model):
    organization = organisation_key(on_delete=models.PROTECT, related_name="mcp_gateways")
    agent = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        related_name="mcp_gateways",
        help_text="Whose tools MCP clients see, behind whose hooks and approval gate.",
    )
    name = models.CharField(max_length=200)
    key = models.CharField(
        max_length=40,
        unique=True,
        default=new_gateway_key,
        editable=False,
        help_text="Part of the gateway's address, /mcp/<key>/. Not a secret on its own: every call "
        "also carries a person's API token.",
    )
    enabled = models.BooleanField(default=True, help_text="Off: the address answers 404; history stays.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "MCP gateway"

    def __str__(self) -> str:
        return f"{self.name} ({self.agent})"

    @property
    def path(self) -> str:
        return f"/mcp/{self.key}/"


class GatewayCall(models.Model):
    """One ``tools/call`` a client made, and the run that carries it out.

    ``args_sha256`` with the user, gateway and tool name finds a call whose answer never reached
    its client (``delivered_at`` empty) when the client calls again with the same arguments: that
    call is answered from the same run, never run a second time."""

    gateway = models.ForeignKey(Gateway, on_delete=models.PROTECT, related_name="calls")
    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="gateway_call")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    tool_name = models.CharField(max_length=120)
    arguments = models.JSONField(default=dict)
    args_sha256 = models.CharField(max_length=64)
    tool_call_id = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The retry lookup reads only calls not yet delivered: a client that calls the same
            # tool with the same arguments all day must not make each call scan the earlier ones.
            models.Index(
                fields=["gateway", "user", "tool_name", "args_sha256"],
                condition=models.Q(delivered_at__isnull=True),
                name="gatewaycall_undelivered",
            )
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} via {self.gateway.name}"
