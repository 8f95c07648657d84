"""The personas and factories every test shares.

Personas: one organisation ("Acme") with a user per role, and a stranger from another
organisation ("Globex"). Factories build agents, connectors and actions with sane defaults.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

from agents.models import Agent, Connector, ConnectorAction, HookDeclaration
from tenancy.models import Membership, Organization, Role

User = get_user_model()
PASSWORD = "persona-pass-123"


@dataclass
class Personas:
    org: Organization
    member: Any  # alice: chats with agents
    operator: Any  # oscar: configures agents
    approver: Any  # april: decides approvals
    auditor: Any  # aude: reads history
    admin: Any  # adam: organisation admin
    other_org: Organization
    stranger: Any  # sam: member of another organisation


def make_user(username: str, org: Organization | None = None, role: str = Role.MEMBER, **extra: Any) -> Any:
    user = User.objects.create_user(username, f"{username}@example.test", PASSWORD, **extra)
    if org is not None:
        Membership.objects.create(organization=org, user=user, role=role)
    return user


def make_personas() -> Personas:
    org = Organization.objects.create(name="Acme")
    other = Organization.objects.create(name="Globex")
    return Personas(
        org=org,
        member=make_user("alice", org, Role.MEMBER),
        operator=make_user("oscar", org, Role.OPERATOR, is_staff=True),
        approver=make_user("april", org, Role.APPROVER),
        auditor=make_user("aude", org, Role.AUDITOR),
        admin=make_user("adam", org, Role.ADMIN, is_staff=True),
        other_org=other,
        stranger=make_user("sam", other, Role.MEMBER),
    )


def scripted(*turns: dict[str, Any], hooks: list[Any] | None = None) -> dict[str, Any]:
    """A ``model_config_json`` for the scripted provider playing ``turns``."""
    config: dict[str, Any] = {"provider": "scripted", "script": {"turns": list(turns)}}
    if hooks is not None:
        config["hooks"] = {"class_hooks": hooks}
    return config


def make_agent(org: Organization, owner: Any, *, name: str = "Procurement assistant", **fields: Any) -> Agent:
    actions = fields.pop("actions", [])
    fields.setdefault("model_config_json", scripted({"content": "Hello."}))
    agent = Agent.objects.create(organization=org, owner=owner, name=name, **fields)
    if actions:
        agent.actions.set(actions)
    return agent


def make_http_connector(org: Organization, base_url: str, *, slug: str = "oa", **fields: Any) -> Connector:
    return Connector.objects.create(
        organization=org, slug=slug, name=slug.upper(), base_url=base_url, **fields
    )


def make_database_connector(
    org: Organization, dsn: str, *, slug: str = "ledger", read_dsn: str | None = None, **fields: Any
) -> Connector:
    """A database connector, read back so its secrets come out of the encrypted field."""
    secrets = {"dsn": dsn} if read_dsn is None else {"dsn": dsn, "read_dsn": read_dsn}
    connector = Connector.objects.create(
        organization=org,
        slug=slug,
        name=slug.title(),
        kind=Connector.Kind.DATABASE,
        secrets=secrets,
        **fields,
    )
    return Connector.objects.get(pk=connector.pk)


def make_action(connector: Connector, name: str, *, method: str = "GET", path: str = "", **fields: Any):
    fields.setdefault("parameters_schema", {"type": "object", "properties": {}})
    return ConnectorAction.objects.create(
        connector=connector, name=name, method=method, path_template=path, **fields
    )


def make_hook(
    owner: Agent | Organization, name: str, *, kind: str = "class", **fields: Any
) -> HookDeclaration:
    """A validated hook declaration: an agent's own, or its organisation's enforced one when
    ``owner`` is an organisation."""
    agent = owner if isinstance(owner, Agent) else None
    organization = owner.organization if isinstance(owner, Agent) else owner
    hook = HookDeclaration(organization=organization, agent=agent, name=name, kind=kind, **fields)
    hook.full_clean()
    hook.save()
    return hook


@pytest.fixture
def personas(db: None) -> Personas:
    return make_personas()


@pytest.fixture
def superuser(db: None) -> Any:
    return User.objects.create_superuser("root", "root@example.test", PASSWORD)


def with_roles(*users: Any) -> None:
    """Give ``users`` the groups and staff flag of their memberships, as the product does
    (``tenancy.roles``): what an operator, auditor or admin really gets in the admin."""
    from tenancy.roles import user_roles_sync

    for user in users:
        user_roles_sync(user=user)
        user.refresh_from_db()


def make_governed(personas: Personas) -> Personas:
    """``personas`` with the permissions of their roles, and a Globex operator (gina)."""
    personas.other_operator = make_user("gina", personas.other_org, Role.OPERATOR)  # type: ignore[attr-defined]
    with_roles(
        personas.member,
        personas.operator,
        personas.approver,
        personas.auditor,
        personas.admin,
        personas.stranger,
        personas.other_operator,  # type: ignore[attr-defined]
    )
    return personas


@pytest.fixture
def governed(personas: Personas) -> Personas:
    """The personas with the permissions of their roles, and a Globex operator (gina)."""
    return make_governed(personas)


@contextmanager
def kept_for_the_module(request: pytest.FixtureRequest, django_db_blocker: Any) -> Iterator[None]:
    """For a module-scoped fixture: what it makes inside this block is made once and seen by every
    test of the module, and rolled back after the last. Each test runs in a transaction of its own
    nested in this one (pytest-django's ``db``: a savepoint, rolled back after the test), so no test
    sees another's changes. Only for modules without transactional tests, whose flush would empty
    the database under the open transaction; and the fixture's objects are shared Python objects,
    so a test that changes one in memory reads it back from the database first. A module with a
    transactional test is refused at once, naming it."""
    module = request.node.nodeid + "::"
    for item in request.session.items:
        marker = item.get_closest_marker("django_db")
        flushed = "transactional_db" in getattr(item, "fixturenames", ()) or (
            marker is not None and (marker.kwargs.get("transaction") or marker.args[:1] == (True,))
        )
        if item.nodeid.startswith(module) and flushed:
            pytest.fail(f"{item.nodeid} is transactional: its module cannot keep data for all its tests")
    with django_db_blocker.unblock(), transaction.atomic():
        yield
        transaction.set_rollback(True)
