"""Demo data for ``make run``: an organisation with a user per role and a superuser, the demo
payments service's purchases, an HTTP connector to that service, a scripted agent using it, an
approval rule for large purchase orders and (from the apps above, through :data:`demo_seeded`)
the organisation's approver policy.

The payments service (``demo_payments``) is a demo target served by this same process, not part
of the platform: the agent reaches it over real HTTP through the connector, like any service.

Re-running :func:`demo_setup` (``manage.py demo_setup``, and every ``make run``) resets the demo:
the purchases, the connector's actions, the agent, its approval rule and the approver policy go
back to what is written here."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.dispatch import Signal

from agents.models import Agent, Connector, ConnectorAction, HookDeclaration
from demo_payments.services import purchase_seed_demo
from tenancy.models import Organization, Role
from tenancy.roles import membership_set

DEMO_PASSWORD = "demo-pass-2026"  # noqa: S105 - published demo credentials, README lists them
DEMO_USERS: list[tuple[str, str | None]] = [
    ("admin", None),  # the superuser
    ("alice", Role.MEMBER),
    ("oscar", Role.OPERATOR),
    ("april", Role.APPROVER),
    ("lee", Role.APPROVER),
    ("fiona", Role.APPROVER),
    ("aude", Role.AUDITOR),
    ("adam", Role.ADMIN),
]
DEMO_MANAGERS = {"alice": "lee"}
"""Who reports to whom: lee leads alice's team (an approval stage asks "the requester's manager")."""
RESEED_COMMAND = "manage.py demo_setup"
DEMO_ORGANIZATION = "Acme Procurement (demo)"
# What each demo account is for, in a word people understand (the landing page's hint).
_ROLE_WORDS = {
    Role.MEMBER: "chat",
    Role.APPROVER: "approve",
    Role.AUDITOR: "audit",
    Role.OPERATOR: "configure",
    Role.ADMIN: "administer",
}

demo_seeded = Signal()
"""Sent by :func:`demo_setup` inside its transaction, with ``organization`` and ``agent``: apps
above this one seed their part of the demo (the approvals app: the approver policy). A receiver
returns one line saying what it seeded (``manage.py demo_setup`` prints it), or ``None``. Sent
synchronously, not on commit: the demo is set up whole or not at all."""

DEMO_AGENT_NAME = "Procurement assistant"
DEMO_AGENT_INSTRUCTIONS = (
    "You help the procurement team of Acme. Use oa__purchase_list to list purchases, "
    "oa__purchase_get to look one up, oa__purchase_pay to pay one (always the exact amount listed, "
    "one purchase at a time) and oa__purchase_create to raise a purchase order. Payments, and "
    "purchase orders of 50,000 or more, wait for an approver's decision. Answer in plain sentences: "
    "what was paid or ordered, to whom, how much with its currency, and the reference; when a "
    "person rejected a call, say who and why and do not try again."
)
ORDER_THRESHOLD = 50_000
"""Purchase orders of this amount or more wait for an approver (the demo's ``confirm_when``)."""

# --- what the scripted model says (format: agents/llm/scripted.py) ---------------------------------

# When every purchase is paid the agent says so and nothing more: how to reset the demo is a
# developer's command, which the demo payments page (/demo/) gives; people chatting never need it.


def _refusals(what: str, undone: str) -> list[dict[str, Any]]:
    """The cases of a call that did not go through, as a person would say them: rejected, expired,
    cancelled, refused by the payments service, anything else."""
    return [
        {
            "when": {"last": r"^Rejected by (?P<who>.+?): (?P<why>.*?)[.!?]* The call was not executed"},
            "content": f"{undone}: {{match.who}} rejected the {what} ({{match.why}}).",
        },
        {
            "when": {"last": r"^No decision within (?P<seconds>\d+) s"},
            "content": f"{undone}: nobody decided on the {what} within {{match.seconds}} seconds, so "
            "the request expired. Ask me again to send a new request.",
        },
        {
            "when": {"last": r"^The approval request was cancelled"},
            "content": f"{undone}: the approval request was cancelled.",
        },
        {
            "when": {"last": r"already_paid"},
            "content": f"{undone}: that purchase was already paid.",
        },
        {
            "when": {"last": r'"detail": "(?P<detail>[^"]+)"'},
            "content": f"{undone}: the payments service refused the {what} ({{match.detail}}).",
        },
        {"content": f"{undone}: the {what} did not go through ({{last}})."},
    ]


_PAID = (
    "Paid {last.id}: {last.amount:,.2f} {last.currency} to {last.vendor}, reference {last.paid_reference}."
)
_PAY_OUTCOME: dict[str, Any] = {
    "choose": [
        {"when": {"last.paid_reference": "."}, "content": _PAID},
        *_refusals("payment", "Nothing was paid"),
    ]
}
_NOTE = "Paid by the procurement assistant"
_HELP = (
    "I can:\n\n"
    '- **list the purchases**: "show the purchases";\n'
    '- **pay the pending purchase** (the first one waiting), or one by its number: "pay PO-1002";\n'
    '- **raise a purchase order**: "order 2,000 USD from Contoso for 10 monitors".\n\n'
    "Every payment waits for an approver's decision, and so does a purchase order of "
    f"{ORDER_THRESHOLD:,} or more."
)

DEMO_SCRIPT: dict[str, Any] = {
    "rules": [
        {
            # "pay PO-1002": that purchase, if it is still pending.
            "match": r"\bpay\b.*?\b(?P<purchase>PO-\d+)\b",
            "turns": [
                {
                    "content": "Let me look up {match.purchase}.",
                    "tool_calls": [
                        {"name": "oa__purchase_get", "arguments": {"purchase_id": "$match.purchase"}}
                    ],
                },
                {
                    "choose": [
                        {
                            "when": {"last.status": "^paid$"},
                            "content": "{last.id} is already paid: {last.amount:,.2f} {last.currency} to "
                            "{last.vendor}, reference {last.paid_reference}.",
                        },
                        {
                            "when": {"last.status": "^pending$"},
                            "content": "Paying {last.id}: {last.amount:,.2f} {last.currency} "
                            "to {last.vendor}. An approver decides first.",
                            "tool_calls": [
                                {
                                    "name": "oa__purchase_pay",
                                    "arguments": {
                                        "purchase_id": "$last.id",
                                        "amount": "$last.amount",
                                        "note": _NOTE,
                                    },
                                }
                            ],
                        },
                        {
                            "when": {"last": "answered 404"},
                            "content": "There is no purchase {match.purchase}.",
                        },
                        {"content": "I could not look up {match.purchase} ({last})."},
                    ]
                },
                _PAY_OUTCOME,
            ],
        },
        {
            # "pay the pending purchase": the first one pending, or a plain "nothing is pending".
            "match": r"\bpay\b",
            "turns": [
                {
                    "content": "Let me look up the pending purchases.",
                    "tool_calls": [{"name": "oa__purchase_list", "arguments": {"status": "pending"}}],
                },
                {
                    "choose": [
                        {
                            "when": {"last": r"^\s*\[\s*\]\s*$"},
                            "content": "Nothing is pending: every purchase is paid.",
                        },
                        {
                            "when": {"last.0.id": "."},
                            "content": "Paying {last.0.id}: {last.0.amount:,.2f} {last.0.currency} to "
                            "{last.0.vendor}. An approver decides first.",
                            "tool_calls": [
                                {
                                    "name": "oa__purchase_pay",
                                    "arguments": {
                                        "purchase_id": "$last.0.id",
                                        "amount": "$last.0.amount",
                                        "note": _NOTE,
                                    },
                                }
                            ],
                        },
                        {"content": "I could not read the pending purchases ({last})."},
                    ]
                },
                _PAY_OUTCOME,
            ],
        },
        {
            # "order 60,000 USD from Contoso for 40 laptops": a new purchase (the demo's
            # confirm_when asks an approver from 50,000 on).
            "match": r"\b(?:order|raise)\b\D*?(?P<amount>\d[\d,]*(?:\.\d{1,2})?)\s*(?:usd|dollars)?\s+"
            r"from\s+(?P<vendor>.+?)\s+for\s+(?P<what>.+?)[\s.!]*$",
            "turns": [
                {
                    "content": "Raising a purchase order to {match.vendor} for {match.what}.",
                    "tool_calls": [
                        {
                            "name": "oa__purchase_create",
                            "arguments": {
                                "vendor": "$match.vendor",
                                "amount": "$match.amount|number",
                                "description": "$match.what",
                            },
                        }
                    ],
                },
                {
                    "choose": [
                        {
                            "when": {"last.id": ".", "last.status": "^pending$"},
                            "content": "Raised {last.id}: {last.amount:,.2f} {last.currency} to "
                            "{last.vendor} for {last.description}. It is pending; "
                            'say "pay {last.id}" to pay it.',
                        },
                        *_refusals("purchase order", "No purchase order was raised"),
                    ]
                },
            ],
        },
        {
            "match": r"\b(?:order|raise)\b",
            "turns": [
                {
                    "content": "To raise a purchase order, tell me how much, from whom and what for, e.g. "
                    '"order 2,000 USD from Contoso for 10 monitors". Orders of '
                    f"{ORDER_THRESHOLD:,} or more wait for an approver's decision."
                }
            ],
        },
        {
            "match": r"^\W*(?:hello|hi|hey|good (?:morning|afternoon|evening)|help|what can you do)\b",
            "turns": [{"content": f"Hello! I'm the procurement assistant of the Acme demo. {_HELP}"}],
        },
        {
            "match": r"\b(?:list|show|purchases?|pending|paid|status)\b",
            "turns": [
                {"tool_calls": [{"name": "oa__purchase_list", "arguments": {}}]},
                {
                    "choose": [
                        {
                            "when": {"last": r"^\s*\[\s*\]\s*$"},
                            "content": "There are no purchases.",
                        },
                        {
                            "when": {"last.0.id": "."},
                            "content": "Here are the purchases:\n\n{each}",
                            "each": {
                                "line": "- **{item.id}** · {item.vendor}, {item.description}: "
                                "{item.amount:,.2f} {item.currency} · {item.status}"
                            },
                        },
                        {"content": "I could not read the purchases ({last})."},
                    ]
                },
            ],
        },
        {"turns": [{"content": f"I'm not sure what you mean. {_HELP}"}]},
    ]
}

# --- the connector's actions ------------------------------------------------------------------------

PURCHASE_LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {
            "type": "string",
            "title": "Status",
            "enum": ["pending", "paid"],
            "description": "Only purchases in this state.",
        }
    },
    "additionalProperties": False,
}
PURCHASE_GET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "purchase_id": {"type": "string", "title": "Purchase", "description": 'The purchase, e.g. "PO-1001".'}
    },
    "required": ["purchase_id"],
    "additionalProperties": False,
}
PURCHASE_PAY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "purchase_id": {
            "type": "string",
            "title": "Purchase",
            "description": 'The purchase to pay, e.g. "PO-1001".',
        },
        "amount": {"type": "number", "title": "Amount", "description": "Exactly the purchase's amount."},
        "note": {
            "type": "string",
            "title": "Note",
            "description": "An optional note for the payment record.",
        },
    },
    "required": ["purchase_id", "amount"],
    "additionalProperties": False,
}
PURCHASE_CREATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "vendor": {"type": "string", "title": "Vendor", "minLength": 1, "maxLength": 200},
        "amount": {"type": "number", "title": "Amount", "exclusiveMinimum": 0},
        "description": {"type": "string", "title": "What for", "maxLength": 1000},
        "currency": {
            "type": "string",
            "title": "Currency",
            "pattern": "^[A-Z]{3}$",
            "default": "USD",
            "description": "Default USD.",
        },
    },
    "required": ["vendor", "amount"],
    "additionalProperties": False,
}

# (name, fields): what operators and people read for each action ("display_name", "description").
DEMO_ACTIONS: list[tuple[str, dict[str, Any]]] = [
    (
        "purchase_list",
        {
            "display_name": "List purchases",
            "description": "List the purchases (optionally only the pending or the paid ones), with "
            "their vendor, amount, currency and status.",
            "method": ConnectorAction.Method.GET,
            "path_template": "purchases",
            "parameters_schema": PURCHASE_LIST_SCHEMA,
            "requires_confirmation": False,
            "is_write": False,
        },
    ),
    (
        "purchase_get",
        {
            "display_name": "Look up a purchase",
            "description": "One purchase by its number: vendor, description, amount, currency, status "
            "and, once paid, the payment's reference.",
            "method": ConnectorAction.Method.GET,
            "path_template": "purchases/{purchase_id}",
            "parameters_schema": PURCHASE_GET_SCHEMA,
            "requires_confirmation": False,
            "is_write": False,
        },
    ),
    (
        "purchase_pay",
        {
            "display_name": "Pay a purchase",
            "description": "Pay a pending purchase; the amount must equal the purchase's amount. "
            "Every payment waits for an approver.",
            "method": ConnectorAction.Method.POST,
            "path_template": "purchases/{purchase_id}/pay",
            "parameters_schema": PURCHASE_PAY_SCHEMA,
            "requires_confirmation": True,
            "is_write": True,
            # Approvers see what the payment is for: the purchase, read when approval is asked.
            "context_fields": ["vendor", "description", "amount", "currency"],
        },
    ),
    (
        "purchase_create",
        {
            "display_name": "Raise a purchase order",
            "description": "Create a pending purchase for a vendor, an amount (USD unless a currency is "
            f"given) and what it is for. Orders of {ORDER_THRESHOLD:,} or more wait for an approver "
            "(the agent's confirm_when hook); smaller ones are made at once.",
            "method": ConnectorAction.Method.POST,
            "path_template": "purchases",
            "parameters_schema": PURCHASE_CREATE_SCHEMA,
            # Not flagged: the flag would ask for every order, and confirm_when can only add a
            # reason to ask, never remove one. The agent's hook asks for the large ones.
            "requires_confirmation": False,
            "is_write": True,
        },
    ),
]
AGENT_ACTIONS = ("purchase_list", "purchase_get", "purchase_pay", "purchase_create")

ORDER_APPROVAL_HOOK: dict[str, Any] = {
    "tools": "oa__purchase_create",
    "conditions": [{"field": "amount", "op": ">=", "value": ORDER_THRESHOLD}],
    "reason": f"purchase orders of {ORDER_THRESHOLD:,} or more need an approver; smaller ones go "
    "through (payments always ask: Pay a purchase is flagged requires confirmation)",
}
"""The demo's ``confirm_when``: on "Raise a purchase order", which is not flagged
``requires_confirmation`` (a flagged tool always asks, so a threshold on it would change nothing)."""
ORDER_APPROVAL_DECLARATION: dict[str, Any] = {
    "kind": HookDeclaration.Kind.CLASS,
    "point": "",
    "matcher": "",
    "priority": None,
    "timeout": None,
    "on_error": "",
    "mode": HookDeclaration.Mode.ENFORCE,
    "params": ORDER_APPROVAL_HOOK,
}
"""The fields of its declaration on the demo agent, as re-seeding puts them back."""


def demo_sign_ins() -> list[tuple[str, str]]:
    """The demo's accounts as ``(username, what it is for)`` ("alice", "chat"), one per role, people
    who chat and decide first, for a page that tells visitors how to try the demo; empty when the demo was
    not set up in this database. The superuser is left out: it is for developers."""
    if not Organization.objects.filter(name=DEMO_ORGANIZATION).exists():
        return []
    order = list(_ROLE_WORDS)
    # One account per role: the first of :data:`DEMO_USERS` (the other approvers, lee and fiona,
    # are for the two-stage policy, which the walkthrough introduces).
    first: dict[str, str] = {}
    for username, role in DEMO_USERS:
        if role is not None:
            first.setdefault(role, username)
    accounts = sorted((order.index(role), username) for role, username in first.items())
    return [(username, _ROLE_WORDS[order[rank]]) for rank, username in accounts]


@transaction.atomic
def demo_setup(*, base_url: str | None = None) -> dict[str, Any]:
    """Create the demo data, or put it back as written here; idempotent, so ``make run`` calls it on
    every start and ``manage.py demo_setup`` resets a demo that was used up.

    ``base_url`` is where this server is reachable (default ``settings.SITE_URL``): the connector
    calls ``<base_url>/demo/api/``. Returns ``{"organization": name, "users": [(username, role
    label)], "agent": {"id", "name"}, "seeded": [lines from :data:`demo_seeded`'s receivers]}``.
    """
    User = get_user_model()
    org, _ = Organization.objects.get_or_create(name=DEMO_ORGANIZATION)
    users = []
    for username, role in DEMO_USERS:
        user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@demo.test"})
        user.set_password(DEMO_PASSWORD)
        user.is_superuser = role is None
        user.is_staff = role is None
        user.save()
        if role is not None:
            # The role's group and the staff flag come with the membership (tenancy.roles).
            membership_set(organization=org, user=user, role=role)
        users.append((username, "superuser" if role is None else str(role.label)))
    for username, manager in DEMO_MANAGERS.items():
        org.memberships.filter(user__username=username).update(manager=User.objects.get(username=manager))

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
    actions = {
        name: ConnectorAction.objects.update_or_create(connector=connector, name=name, defaults=fields)[0]
        for name, fields in DEMO_ACTIONS
    }
    pay = actions["purchase_pay"]
    pay.context_action = actions["purchase_get"]
    pay.save(update_fields=["context_action"])
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
    agent.actions.set([actions[name] for name in AGENT_ACTIONS])
    # The demo's own rule is the one on its tool; other hooks an operator added stay as they are.
    hook = HookDeclaration.objects.filter(
        organization=org, agent=agent, name="confirm_when", params__tools=ORDER_APPROVAL_HOOK["tools"]
    ).order_by("pk").first() or HookDeclaration(organization=org, agent=agent, name="confirm_when")
    for field, value in ORDER_APPROVAL_DECLARATION.items():
        setattr(hook, field, value)
    hook.full_clean()  # built as a run would build it: a demo hook that cannot run fails here
    hook.save()
    agent.clean()  # a demo that ships a configuration the engine would refuse must fail here, loudly
    seeded = [line for _, line in demo_seeded.send(sender=Agent, organization=org, agent=agent) if line]
    return {
        "organization": org.name,
        "users": users,
        "agent": {"id": agent.pk, "name": agent.name},
        "seeded": seeded,
    }
