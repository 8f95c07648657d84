"""Demo data for ``make run``: an organisation with a user per role and a superuser, the demo
payments service's purchases, an HTTP connector to that service and a scripted agent using it.

The payments service (``demo_payments``) is a demo target served by this same process, not part
of the platform: the agent reaches it over real HTTP through the connector, like any service."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from agents.models import Agent, Connector, ConnectorAction, Organization, Role
from agents.roles import membership_set
from demo_payments.services import purchase_seed_demo

DEMO_PASSWORD = "demo-pass-2026"  # noqa: S105 - published demo credentials, README lists them
DEMO_USERS: list[tuple[str, str | None]] = [
    ("admin", None),  # the superuser
    ("alice", Role.MEMBER),
    ("oscar", Role.OPERATOR),
    ("april", Role.APPROVER),
    ("aude", Role.AUDITOR),
    ("adam", Role.ADMIN),
]


DEMO_AGENT_NAME = "Procurement assistant"
DEMO_AGENT_INSTRUCTIONS = (
    "You help the procurement team of Acme. Use oa__purchase_list to look up purchases and "
    "oa__purchase_pay to pay one: always pay the exact amount listed for the purchase, one purchase "
    "at a time. Payments wait for a person's approval; tell the user what was paid and its reference."
)

# The scripted provider plays these turns (format: agents/llm/scripted.py). "pay …" lists the
# pending purchases and pays the first with the listed amount; anything else lists and summarises.
DEMO_SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "match": r"\bpay",
            "turns": [
                {
                    "content": "Let me look up the pending purchases.",
                    "tool_calls": [{"name": "oa__purchase_list", "arguments": {"status": "pending"}}],
                },
                {
                    "content": "Paying the first pending purchase.",
                    "tool_calls": [
                        {
                            "name": "oa__purchase_pay",
                            "arguments": {
                                "purchase_id": "$last.0.id",
                                "amount": "$last.0.amount",
                                "note": "Paid by the procurement assistant",
                            },
                        }
                    ],
                },
                {"content": "Payment result: {last}"},
            ],
        },
        {
            "turns": [
                {"tool_calls": [{"name": "oa__purchase_list", "arguments": {}}]},
                {"content": "Here are the purchases: {last}"},
            ]
        },
    ]
}

PURCHASE_LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {
            "type": "string",
            "enum": ["pending", "paid"],
            "description": "Only purchases in this state.",
        }
    },
    "additionalProperties": False,
}
PURCHASE_PAY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "purchase_id": {"type": "string", "description": 'The purchase to pay, e.g. "PO-1001".'},
        "amount": {"type": "number", "description": "Exactly the purchase's amount."},
        "note": {"type": "string", "description": "An optional note for the payment record."},
    },
    "required": ["purchase_id", "amount"],
    "additionalProperties": False,
}


@transaction.atomic
def demo_setup(*, base_url: str | None = None) -> dict[str, Any]:
    """Create or refresh the demo data; idempotent, so ``make run`` can call it on every start.

    ``base_url`` is where this server is reachable (default ``settings.SITE_URL``): the connector
    calls ``<base_url>/demo/api/``. Re-running puts the demo purchases back to their seeded state.
    Returns ``{"organization": name, "users": [(username, role label)], "agent": {"id", "name"}}``.
    """
    User = get_user_model()
    org, _ = Organization.objects.get_or_create(name="Acme Procurement (demo)")
    users = []
    for username, role in DEMO_USERS:
        user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@demo.test"})
        user.set_password(DEMO_PASSWORD)
        user.is_superuser = role is None
        user.is_staff = role is None
        user.save()
        if role is not None:
            # The role's group and the staff flag come with the membership (agents.roles).
            membership_set(organization=org, user=user, role=role)
        users.append((username, "superuser" if role is None else str(role.label)))

    purchase_seed_demo()
    site = (base_url or settings.SITE_URL).rstrip("/")
    connector, _ = Connector.objects.update_or_create(
        organization=org,
        slug="oa",
        defaults={
            "name": "Demo payments (OA)",
            "kind": Connector.Kind.HTTP,
            "base_url": f"{site}/demo/api/",
            "secrets": {"headers": {"X-Demo-Token": settings.DEMO_PAYMENTS_TOKEN}},
        },
    )
    purchase_list, _ = ConnectorAction.objects.update_or_create(
        connector=connector,
        name="purchase_list",
        defaults={
            "description": "List purchases (optionally only pending or paid ones), with their amounts.",
            "method": ConnectorAction.Method.GET,
            "path_template": "purchases",
            "parameters_schema": PURCHASE_LIST_SCHEMA,
            "requires_confirmation": False,
            "is_write": False,
        },
    )
    purchase_pay, _ = ConnectorAction.objects.update_or_create(
        connector=connector,
        name="purchase_pay",
        defaults={
            "description": "Pay a pending purchase; the amount must equal the purchase's amount.",
            "method": ConnectorAction.Method.POST,
            "path_template": "purchases/{purchase_id}/pay",
            "parameters_schema": PURCHASE_PAY_SCHEMA,
            "requires_confirmation": True,
            "is_write": True,
        },
    )
    agent, _ = Agent.objects.update_or_create(
        organization=org,
        name=DEMO_AGENT_NAME,
        defaults={
            "owner": User.objects.get(username="oscar"),
            "instructions": DEMO_AGENT_INSTRUCTIONS,
            "engine": Agent.Engine.REACT,
            "model_config_json": {"provider": "scripted", "script": DEMO_SCRIPT},
            "builtin_tools": ["current_time", "calculator"],
        },
    )
    agent.actions.set([purchase_list, purchase_pay])
    agent.clean()  # a demo that ships a configuration the engine would refuse must fail here, loudly
    return {"organization": org.name, "users": users, "agent": {"id": agent.pk, "name": agent.name}}
