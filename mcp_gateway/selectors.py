"""What a person reads on the "MCP clients" page: the gateways they may call, and their API token."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.authtoken.models import Token

from agents.models import Membership
from agents.services import chat_refusal
from mcp_gateway.models import Gateway


def gateways_for(*, user: Any) -> QuerySet[Gateway]:
    """The switched-on gateways of the organisations ``user`` may chat in, whose agent can run."""
    orgs = [
        org_id
        for org_id in Membership.objects.filter(user=user).values_list("organization_id", flat=True)
        if chat_refusal(user=user, organization_id=org_id) is None
    ]
    return (
        Gateway.objects.filter(
            organization_id__in=orgs,
            enabled=True,
            agent__archived_at__isnull=True,
            organization__archived_at__isnull=True,
        )
        .select_related("agent", "organization")
        .order_by("organization__name", "name")
    )


def token_created_at(*, user: Any) -> Any:
    """When ``user``'s API token was made (``None``: they have none). Never the token itself."""
    return Token.objects.filter(user=user).values_list("created", flat=True).first()
