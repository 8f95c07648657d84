"""Configuration history: a change made in the admin records who changed which fields, old and new
values; secrets never reach the history tables (only that they changed); auditors read it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from agents.models import Agent, Connector
from approvals.models import ApproverPolicy, ChannelConfig
from tenancy.models import Organization
from tests.admin_kit import logged_in, page_text, url
from tests.approvals.kit import policy_form
from tests.personas import make_agent, make_http_connector, scripted

OLD_KEY = "sk-old-key-0123456789abcdef"
NEW_KEY = "sk-new-key-fedcba9876543210"


def agent_form(agent: Agent, **changes: Any) -> dict[str, Any]:
    form = {
        "organization": agent.organization_id,
        "owner": agent.owner_id,
        "name": agent.name,
        "instructions": agent.instructions,
        "engine": agent.engine,
        "model_config_json": json.dumps(agent.model_config_json),
        "secrets": "",
        "max_iterations": agent.max_iterations,
        "builtin_tools": json.dumps(agent.builtin_tools),
    }
    form.update(changes)
    return form


def with_inlines(client: Any, page_url: str, form: dict[str, Any]) -> dict[str, Any]:
    """``form`` plus the management data of the page's inlines (the hook rows), left unchanged."""
    page = client.get(page_url)
    for inline in page.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        form.update({f"{management.prefix}-{k}": v for k, v in management.initial.items()})
    return form


def history_rows(model: type, pk: Any) -> list[tuple[Any, ...]]:
    """Every column of every historical row of ``model`` ``pk``, read straight from the table."""
    table = model.history.model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table} WHERE id = %s", [pk])  # noqa: S608 - a model's own table
        return cursor.fetchall()


@pytest.fixture
def agent(governed) -> Agent:
    return make_agent(governed.org, governed.operator, secrets={"api_key": OLD_KEY})


def test_changing_an_agent_in_the_admin_records_who_changed_what_with_old_and_new_values(
    governed, agent
) -> None:
    client = logged_in(governed.operator)
    config = scripted({"content": "Hi."})

    response = client.post(
        url(Agent, "change", agent.pk),
        with_inlines(
            client,
            url(Agent, "change", agent.pk),
            agent_form(
                agent,
                name="Payments agent",
                model_config_json=json.dumps(config),
                secrets=json.dumps({"api_key": NEW_KEY}),
            ),
        ),
    )

    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    latest = agent.history.latest()
    assert latest.history_user == governed.operator and latest.history_type == "~"
    delta = latest.diff_against(latest.prev_record)
    changed = {change.field: (change.old, change.new) for change in delta.changes}
    assert changed["name"] == ("Procurement assistant", "Payments agent")
    assert changed["model_config_json"][1]["script"] == {"turns": [{"content": "Hi."}]}
    assert "secrets" not in changed, "secrets are not a history field"

    page = page_text(logged_in(governed.auditor).get(url(Agent, "history", agent.pk)))
    assert "oscar" in page and "Payments agent" in page and "Procurement assistant" in page
    assert "Secrets:" in page and "changed (not shown)" in page
    assert OLD_KEY not in page and NEW_KEY not in page


@pytest.mark.parametrize("model", [Agent, Connector, ChannelConfig])
def test_secrets_are_never_copied_into_the_history_tables_even_encrypted(governed, model) -> None:
    secret = "s3cr3t-" + model.__name__
    if model is Agent:
        obj = make_agent(governed.org, governed.operator, secrets={"api_key": secret})
    elif model is Connector:
        obj = make_http_connector(governed.org, "https://example.test/", secrets={"headers": {"X": secret}})
    else:
        obj = ChannelConfig.objects.create(
            organization=governed.org, kind="web", name="Web", secrets={"t": secret}
        )
    obj.secrets = {"rotated": secret + "-2"}
    obj.save()

    columns = [
        c.name
        for c in connection.introspection.get_table_description(
            connection.cursor(), model.history.model._meta.db_table
        )
    ]
    rows = history_rows(model, obj.pk)

    assert "secrets" not in columns
    assert len(rows) == 2
    assert all(secret not in str(cell) for row in rows for cell in row)
    first, second = model.history.filter(id=obj.pk).order_by("history_id")
    assert first.secrets_fingerprint and second.secrets_fingerprint != first.secrets_fingerprint


def test_an_unchanged_secret_is_not_reported_as_changed(governed, agent) -> None:
    client = logged_in(governed.operator)

    page_url = url(Agent, "change", agent.pk)
    response = client.post(page_url, with_inlines(client, page_url, agent_form(agent, name="Renamed")))
    assert response.status_code == 302

    latest = agent.history.latest()
    assert latest.secrets_fingerprint == latest.prev_record.secrets_fingerprint != ""
    page = page_text(client.get(url(Agent, "history", agent.pk)))
    assert "Renamed" in page and "changed (not shown)" not in page


def test_policies_organisations_and_channels_keep_their_history_too(governed) -> None:
    client = logged_in(governed.admin)
    policy = ApproverPolicy.objects.create(organization=governed.org, timeout_seconds=600)
    form = policy_form(policy, timeout_seconds="900")

    response = client.post(url(ApproverPolicy, "change", policy.pk), form)

    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    latest = policy.history.latest()
    assert latest.history_user == governed.admin
    changes = {c.field: (c.old, c.new) for c in latest.diff_against(latest.prev_record).changes}
    assert changes["timeout_seconds"] == (600, 900)
    assert Organization.history.filter(id=governed.org.pk).exists()
    assert logged_in(governed.auditor).get(url(ApproverPolicy, "history", policy.pk)).status_code == 200


@pytest.mark.parametrize("who", ["operator", "auditor"])
def test_it_refuses_to_save_a_past_version_posted_by_anyone(governed, agent, who) -> None:
    agent.name = "Second"
    agent.save()
    first = agent.history.earliest()
    client = logged_in(getattr(governed, who))
    version_url = f"/admin/agents/agent/{agent.pk}/history/{first.history_id}/"

    page = client.get(version_url)
    posted = client.post(
        version_url, agent_form(agent, name="Taken back", secrets=json.dumps({"api_key": "sk-x"}))
    )

    assert page.status_code == 200 and "Revert" not in page_text(page)
    assert OLD_KEY not in page_text(page)
    assert posted.status_code == 403
    agent.refresh_from_db()
    assert agent.name == "Second" and agent.secrets == {"api_key": OLD_KEY}


def test_other_organisations_history_is_not_reachable(governed, agent) -> None:
    client = logged_in(governed.other_operator)
    version_url = f"/admin/agents/agent/{agent.pk}/history/{agent.history.latest().history_id}/"

    assert client.get(url(Agent, "history", agent.pk)).status_code == 404
    assert client.get(version_url).status_code == 404
    assert client.post(version_url, agent_form(agent, name="Globex took it")).status_code == 404
    agent.refresh_from_db()
    assert agent.name == "Procurement assistant"


def test_the_agents_history_lists_its_hook_changes_with_what_changed(governed, agent) -> None:
    from agents.models import HookDeclaration
    from tests.console.admin_forms import agent_form as full_form
    from tests.console.admin_forms import hook_rows
    from tests.console.hook_editor_kit import condition_inputs, editor_row, post_rows

    condition = condition_inputs(("amount", ">=", "50000"))
    row = editor_row("confirm_when", tools="oa__purchase_pay", mode="", reason="", **condition)
    assert post_rows(governed.operator, governed, agent, row).status_code == 302
    hook = HookDeclaration.objects.get(agent=agent)
    changed = {**row, "id": str(hook.pk), "params__confirm_when__conditions-value": ["10000", ""]}
    form = full_form(governed, agent.model_config_json, name=agent.name, owner=agent.owner_id)
    form.update(hook_rows(changed, initial=1))
    assert logged_in(governed.operator).post(url(Agent, "change", agent.pk), form).status_code == 302

    page = page_text(logged_in(governed.auditor).get(url(Agent, "history", agent.pk)))

    assert "Created: hook confirm_when" in page and "Changed: hook confirm_when" in page
    assert "<strong>Parameters — tools:</strong> oa__purchase_pay" in page
    assert "<strong>Parameters — conditions:</strong> amount >= 50000 → amount >= 10000" in page
    assert '<td class="history-who">oscar</td>' in page
    entries = page.count('class="history-entry"')
    assert entries == 3, "created agent, added hook, changed hook: the agent's empty saves are left out"
