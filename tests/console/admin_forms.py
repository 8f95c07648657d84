"""Form data the agents admin tests post: an agent, a connector, an organisation with its
members, the hook rows of an agent's declarations, and the permissions a staff user is granted."""

from __future__ import annotations

import json
from typing import Any

from agents.models import Agent, Connector
from tenancy.models import Membership, Organization
from tests import admin_kit


def grant(user: Any, *codenames: str) -> None:
    admin_kit.grant(user, *codenames, app_label=("agents", "tenancy"))


def agent_form(personas, config: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    data = {
        "organization": personas.org.pk,
        "owner": personas.operator.pk,
        "name": "Invoice clerk",
        "instructions": "",
        "engine": Agent.Engine.REACT,
        "model_config_json": json.dumps(config),
        "max_iterations": 12,
        "builtin_tools": "[]",
        **hook_rows(),
    }
    data.update(overrides)
    return data


def hook_rows(*rows: dict[str, Any], initial: int = 0) -> dict[str, Any]:
    """The hook declarations inline's part of an agent or organisation admin form."""
    data: dict[str, Any] = {
        "hook_declarations-TOTAL_FORMS": str(len(rows)),
        "hook_declarations-INITIAL_FORMS": str(initial),
        "hook_declarations-MIN_NUM_FORMS": "0",
        "hook_declarations-MAX_NUM_FORMS": "1000",
    }
    for n, row in enumerate(rows):
        data.update({f"hook_declarations-{n}-{key}": value for key, value in row.items()})
    return data


def connector_form(connector: Connector, secrets: str) -> dict[str, Any]:
    return {
        "organization": connector.organization_id,
        "slug": connector.slug,
        "name": connector.name,
        "kind": connector.kind,
        "base_url": connector.base_url,
        "secrets": secrets,
        "timeout_seconds": connector.timeout_seconds,
        "actions-TOTAL_FORMS": "0",
        "actions-INITIAL_FORMS": "0",
        "actions-MIN_NUM_FORMS": "0",
        "actions-MAX_NUM_FORMS": "1000",
    }


def organization_form(org: Organization, memberships: list[Membership], *new_rows: dict[str, Any]) -> dict:
    data: dict[str, Any] = {
        "name": org.name,
        "read_only": "",
        "memberships-TOTAL_FORMS": str(len(memberships) + len(new_rows)),
        "memberships-INITIAL_FORMS": str(len(memberships)),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
        **hook_rows(),
    }
    rows = [{"id": m.pk, "organization": org.pk, "user": m.user_id, "role": m.role} for m in memberships]
    rows += [{"id": "", "organization": org.pk, **row} for row in new_rows]
    for n, row in enumerate(rows):
        data.update({f"memberships-{n}-{key}": value for key, value in row.items()})
    return data
