"""What a person reads on the "MCP clients" page (the gateways they may call, and their API
token), and what the gateway reads of who calls it (:func:`caller_rows_async`)."""

from __future__ import annotations

import functools
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet
from psycopg import AsyncConnection
from rest_framework.authtoken.models import Token

from agents.models import Agent
from agents.services import chat_refusal
from fimone import adb, rows
from mcp_gateway.models import Gateway
from tenancy.models import Membership, Organization


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


_GATEWAY_ROW = (Gateway, Agent, Organization, Organization)
"""The models of the gateway's part of :func:`caller_rows_async`'s row, in order."""


async def caller_rows_async(
    db: AsyncConnection, *, token: str, key: str
) -> tuple[Any | None, Gateway | None, set[str]]:
    """On the event loop, on ``db`` (:mod:`fimone.adb`), in one statement: the user whose API
    token ``token`` is, the switched-on gateway at ``key`` (with its agent, the agent's
    organisation and its own) and the user's roles in the gateway's organisation — what
    ``services.gateway_for_user`` and the token lookup read through the ORM, as the same model
    instances. ``(None, None, set())`` for an unknown token; no gateway for an unknown or
    switched-off key. Deciding is left to the same checks as there (``services``)."""
    row = await adb.fetchone(db, _caller_sql(), [key, True, token])
    if row is None:
        return None, None, set()
    take = rows.taker(row)

    def one(model: Any) -> Any:
        fields = rows.all_fields(model)
        return rows.instance(model, fields, take(len(fields)))

    user = one(get_user_model())
    found, roles = take(2)
    if not found:  # no such switched-on gateway: the rest of the row is empty
        return user, None, set()
    gateway, agent, agent_org, gateway_org = (one(model) for model in _GATEWAY_ROW)
    agent.organization = agent_org
    gateway.agent, gateway.organization = agent, gateway_org
    return user, gateway, set(roles)


@functools.cache  # our table and column names: the text never changes
def _caller_sql() -> str:
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    user_model = get_user_model()

    def table(model: Any) -> str:
        return quote(model._meta.db_table)

    selected = [
        rows.columns(user_model, "u", rows.all_fields(user_model)),
        "g.id IS NOT NULL",
        f"ARRAY(SELECT m.role FROM {table(Membership)} m WHERE m.user_id = u.id "  # noqa: S608 - our names
        "AND m.organization_id = g.organization_id)",
        *(
            rows.columns(model, alias, rows.all_fields(model))
            for model, alias in zip(_GATEWAY_ROW, ("g", "a", "ao", "go"), strict=True)
        ),
    ]
    return (
        f"SELECT {', '.join(selected)} FROM {table(Token)} t "  # noqa: S608 - our names only
        f"JOIN {table(user_model)} u ON u.id = t.user_id "
        f"LEFT JOIN {table(Gateway)} g ON g.key = %s AND g.enabled = %s "
        f"LEFT JOIN {table(Agent)} a ON a.id = g.agent_id "
        f"LEFT JOIN {table(Organization)} ao ON ao.id = a.organization_id "
        f"LEFT JOIN {table(Organization)} go ON go.id = g.organization_id "
        "WHERE t.key = %s"
    )
