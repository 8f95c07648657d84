"""The admin: every page renders, agent configs are checked, secrets stay write-only, and staff
users see only the organisations they operate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client

from agents import events as ev
from agents.models import (
    Agent,
    Connector,
    ConnectorAction,
    ConnectorCallLog,
    Conversation,
    Invitation,
    Membership,
    Organization,
    Run,
    RunEvent,
    RunStatus,
    ToolExecution,
)
from agents.services import run_start
from tests import admin_kit
from tests.admin_kit import logged_in, page_text, url
from tests.personas import make_action, make_agent, make_http_connector, scripted

SECRET = "s3cr3t-bearer-VALUE-42"
ADMIN_MODELS = (
    Organization,
    Agent,
    Connector,
    Conversation,
    Run,
    ToolExecution,
    Invitation,
    ConnectorCallLog,
)


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)


@pytest.fixture
def world(personas) -> dict[str, Any]:
    """One of everything, in both organisations."""
    connector = make_http_connector(
        personas.org, "https://oa.example.test", secrets={"headers": {"Authorization": f"Bearer {SECRET}"}}
    )
    action = make_action(connector, "purchase_pay", method="POST", path="/purchases/{purchase_id}/pay")
    agent = make_agent(
        personas.org,
        personas.operator,
        model_config_json=scripted({"content": "Hello."}, hooks=[{"name": "truncate_result", "params": {}}]),
        actions=[action],
    )
    run = run_start(agent=agent, user=personas.member, input="pay PO-1")
    RunEvent.objects.create(run=run, seq=1, type=ev.RUN_STARTED, payload={"agent_id": agent.pk})
    RunEvent.objects.create(run=run, seq=2, type=ev.LLM_MESSAGE, payload={"content": "Paying."})
    execution = ToolExecution.objects.create(
        run=run,
        tool_call_id="call-1",
        tool_name=action.tool_name,
        args={"purchase_id": "PO-1"},
        args_sha256="0" * 64,
    )
    globex_agent = make_agent(personas.other_org, personas.stranger, name="Globex secret agent")
    return {
        "connector": connector,
        "action": action,
        "agent": agent,
        "run": run,
        "conversation": run.conversation,
        "execution": execution,
        "globex_agent": globex_agent,
    }


def grant(user: Any, *codenames: str) -> None:
    admin_kit.grant(user, *codenames, app_label="agents")


# --- every page renders ---------------------------------------------------------------------------


def test_every_agents_model_is_registered() -> None:
    registered = {model for model in admin.site._registry if model._meta.app_label == "agents"}

    assert registered == set(ADMIN_MODELS)


@pytest.mark.parametrize("model", ADMIN_MODELS, ids=lambda model: model.__name__)
def test_the_changelist_renders_for_a_superuser(superuser, world, model) -> None:
    client = logged_in(superuser)

    assert client.get(url(model, "changelist")).status_code == 200
    assert client.get(url(model, "changelist"), {"q": "pay"}).status_code == 200


def test_the_change_pages_render_for_a_superuser(superuser, personas, world) -> None:
    client = logged_in(superuser)
    objects = [
        personas.org,
        world["agent"],
        world["connector"],
        world["conversation"],
        world["run"],
        world["execution"],
    ]

    for obj in objects:
        assert client.get(url(type(obj), "change", obj.pk)).status_code == 200, type(obj).__name__
    for model in (Organization, Agent, Connector, Conversation):
        assert client.get(url(model, "add")).status_code == 200, model.__name__


def test_a_run_page_is_read_only_and_lists_its_events_by_seq(superuser, world) -> None:
    response = logged_in(superuser).get(url(Run, "change", world["run"].pk))

    text = page_text(response)
    assert 'name="_save"' not in text
    assert text.index(ev.RUN_STARTED) < text.index(ev.LLM_MESSAGE)
    assert logged_in(superuser).get(url(Run, "add")).status_code == 403


def test_the_connector_page_shows_each_actions_tool_name(superuser, world) -> None:
    response = logged_in(superuser).get(url(Connector, "change", world["connector"].pk))

    assert "oa__purchase_pay" in page_text(response)


# --- agents ---------------------------------------------------------------------------------------


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


def test_the_agent_admin_refuses_an_unknown_hook_name_with_the_message(superuser, personas) -> None:
    config = {
        "provider": "scripted",
        "script": {"turns": [{"content": "x"}]},
        "hooks": {"class_hooks": ["no_such_hook"]},
    }

    response = logged_in(superuser).post(url(Agent, "add"), agent_form(personas, config))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["model_config_json"]
    assert any("unknown hook 'no_such_hook'" in error for error in errors)
    assert "unknown hook 'no_such_hook'" in page_text(response)
    assert not Agent.objects.filter(name="Invoice clerk").exists()


def test_the_agent_admin_refuses_an_unknown_builtin_tool(superuser, personas) -> None:
    data = agent_form(personas, scripted({"content": "x"}), builtin_tools='["rm_rf"]')

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 200
    assert "builtin_tools" in response.context["adminform"].form.errors


def test_the_agent_admin_saves_a_valid_agent(superuser, personas) -> None:
    data = agent_form(personas, scripted({"content": "x"}), builtin_tools='["calculator"]')

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 302
    assert Agent.objects.get(name="Invoice clerk").builtin_tools == ["calculator"]


API_KEY = "sk-typed-AGENT-key-77"


def test_the_agent_admin_stores_the_api_key_encrypted_and_never_shows_it(superuser, personas) -> None:
    openai = {"provider": "openai", "model": "gpt-test"}
    data = agent_form(personas, openai, secrets=json.dumps({"api_key": API_KEY}))

    assert logged_in(superuser).post(url(Agent, "add"), data).status_code == 302

    agent = Agent.objects.get(name="Invoice clerk")
    assert agent.secrets == {"api_key": API_KEY} and "api_key" not in agent.model_config_json
    page = page_text(logged_in(superuser).get(url(Agent, "change", agent.pk)))
    assert API_KEY not in page and "set (encrypted): api_key" in page


def test_the_agent_admin_refuses_an_api_key_in_the_model_config_without_echoing_it(
    superuser, personas
) -> None:
    config = {"provider": "openai", "model": "gpt-test", "api_key": API_KEY}

    response = logged_in(superuser).post(url(Agent, "add"), agent_form(personas, config))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["model_config_json"]
    assert any("put it in the agent's secrets" in error for error in errors)
    assert API_KEY not in response.content.decode()
    assert not Agent.objects.filter(name="Invoice clerk").exists()


def test_the_agent_admin_refuses_an_own_base_url_without_an_own_key(
    superuser, personas, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-platform-ENV-key")
    config = {"provider": "openai", "model": "gpt-test", "base_url": "https://collector.example.test/v1"}

    response = logged_in(superuser).post(url(Agent, "add"), agent_form(personas, config))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["secrets"]
    assert any('own "base_url" needs its own API key' in error for error in errors)
    assert "sk-platform-ENV-key" not in response.content.decode()
    assert not Agent.objects.filter(name="Invoice clerk").exists()


def test_the_agent_admin_refuses_to_drop_the_own_key_while_the_own_base_url_stays(
    superuser, personas
) -> None:
    config = {"provider": "openai", "model": "gpt-test", "base_url": "https://llm.example.test/v1"}
    agent = make_agent(
        personas.org, personas.operator, name="Invoice clerk", model_config_json=config,
        secrets={"api_key": API_KEY},
    )  # fmt: skip
    data = agent_form(personas, config, secrets=json.dumps({"other": "x"}))

    response = logged_in(superuser).post(url(Agent, "change", agent.pk), data)

    assert response.status_code == 200
    assert "secrets" in response.context["adminform"].form.errors
    assert Agent.objects.get(pk=agent.pk).secrets == {"api_key": API_KEY}


def test_the_agent_admin_saves_an_own_base_url_with_an_own_key(superuser, personas) -> None:
    config = {"provider": "openai", "model": "gpt-test", "base_url": "https://llm.example.test/v1"}
    data = agent_form(personas, config, secrets=json.dumps({"api_key": API_KEY}))

    assert logged_in(superuser).post(url(Agent, "add"), data).status_code == 302

    agent = Agent.objects.get(name="Invoice clerk")
    assert agent.model_config_json["base_url"] == "https://llm.example.test/v1"
    assert agent.secrets == {"api_key": API_KEY}


def test_a_view_only_staff_user_does_not_see_the_agents_key(personas) -> None:
    agent = make_agent(personas.org, personas.operator, secrets={"api_key": API_KEY})
    grant(personas.operator, "view_agent")

    response = logged_in(personas.operator).get(url(Agent, "change", agent.pk))

    assert response.status_code == 200
    assert API_KEY not in page_text(response) and "set (encrypted): api_key" in page_text(response)


# --- connector secrets ----------------------------------------------------------------------------


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


@pytest.fixture
def bare_connector(personas) -> Connector:
    """A connector with secrets and no actions (so its form posts without inline rows)."""
    return make_http_connector(
        personas.org, "https://erp.example.test", slug="erp", secrets={"headers": {"X-Api-Key": SECRET}}
    )


def test_the_connector_change_page_never_contains_the_secret(superuser, world) -> None:
    response = logged_in(superuser).get(url(Connector, "change", world["connector"].pk))

    text = page_text(response)
    assert response.status_code == 200
    assert SECRET not in text
    assert "leave blank to keep the current secrets" in text
    assert "set (encrypted)" in text


def test_saving_the_connector_with_blank_secrets_keeps_them(superuser, bare_connector) -> None:
    response = logged_in(superuser).post(
        url(Connector, "change", bare_connector.pk), connector_form(bare_connector, "")
    )

    assert response.status_code == 302
    assert Connector.objects.get(pk=bare_connector.pk).secrets == {"headers": {"X-Api-Key": SECRET}}


def test_saving_the_connector_with_new_secrets_replaces_them(superuser, bare_connector) -> None:
    new = '{"headers": {"X-Api-Key": "rotated"}}'

    response = logged_in(superuser).post(
        url(Connector, "change", bare_connector.pk), connector_form(bare_connector, new)
    )

    assert response.status_code == 302
    assert Connector.objects.get(pk=bare_connector.pk).secrets == {"headers": {"X-Api-Key": "rotated"}}


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ('{"headers": {"X-Api-Key": "typed-secret"', "not valid JSON"),
        ('["typed-secret"]', "must be a JSON object"),
    ],
)
def test_secrets_that_are_not_a_json_object_are_refused_without_echoing_them(
    superuser, bare_connector, typed, message
) -> None:
    response = logged_in(superuser).post(
        url(Connector, "change", bare_connector.pk), connector_form(bare_connector, typed)
    )

    assert response.status_code == 200
    assert any(message in error for error in response.context["adminform"].form.errors["secrets"])
    assert "typed-secret" not in page_text(response) and SECRET not in page_text(response)
    assert Connector.objects.get(pk=bare_connector.pk).secrets == {"headers": {"X-Api-Key": SECRET}}


def test_a_view_only_staff_user_does_not_see_the_secret_either(personas, world) -> None:
    grant(personas.operator, "view_connector")

    response = logged_in(personas.operator).get(url(Connector, "change", world["connector"].pk))

    assert response.status_code == 200
    assert SECRET not in page_text(response)


# --- organisation scope for staff users -----------------------------------------------------------


def test_a_staff_operator_of_acme_does_not_see_globexs_agents(personas, world) -> None:
    grant(personas.operator, "view_agent", "change_agent", "add_agent")
    client = logged_in(personas.operator)

    listing = page_text(client.get(url(Agent, "changelist")))
    assert world["agent"].name in listing
    assert world["globex_agent"].name not in listing and "Globex" not in listing

    assert client.get(url(Agent, "change", world["agent"].pk)).status_code == 200
    assert client.get(url(Agent, "change", world["globex_agent"].pk)).status_code == 302

    form = client.get(url(Agent, "add")).context["adminform"].form
    assert list(form.fields["organization"].queryset) == [personas.org]
    assert personas.stranger not in form.fields["owner"].queryset
    assert set(form.fields["actions"].queryset) == {world["action"]}


def test_a_staff_operator_cannot_assign_an_agent_to_another_organisation(personas) -> None:
    grant(personas.operator, "add_agent", "view_agent")
    data = agent_form(personas, scripted({"content": "x"}), organization=personas.other_org.pk)

    response = logged_in(personas.operator).post(url(Agent, "add"), data)

    assert response.status_code == 200 and "organization" in response.context["adminform"].form.errors
    assert not Agent.objects.filter(name="Invoice clerk").exists()


def test_a_staff_user_without_an_operator_or_admin_role_sees_no_runs(personas, world) -> None:
    personas.member.is_staff = True
    personas.member.save()
    grant(personas.member, "view_run")
    client = logged_in(personas.member)

    assert client.get(url(Run, "changelist")).context["cl"].result_count == 0
    assert client.get(url(Run, "change", world["run"].pk)).status_code == 302


def test_a_staff_operator_sees_the_runs_of_their_organisation(personas, world) -> None:
    grant(personas.operator, "view_run")

    listing = logged_in(personas.operator).get(url(Run, "changelist")).context["cl"]

    assert list(listing.result_list) == [world["run"]]


def test_a_staff_admin_manages_only_their_own_organisation(personas, world) -> None:
    grant(personas.admin, "view_organization", "change_organization", "view_connector")
    client = logged_in(personas.admin)

    assert list(client.get(url(Organization, "changelist")).context["cl"].result_list) == [personas.org]
    assert client.get(url(Organization, "change", personas.org.pk)).status_code == 200
    assert client.get(url(Organization, "change", personas.other_org.pk)).status_code == 302
    assert list(client.get(url(Connector, "changelist")).context["cl"].result_list) == [world["connector"]]


# --- cancelling runs ------------------------------------------------------------------------------


def test_the_cancel_action_cancels_queued_runs_and_reports_refusals(superuser, personas, world) -> None:
    queued = world["run"]
    done = run_start(agent=world["agent"], user=personas.approver, input="done already")
    Run.objects.filter(pk=done.pk).update(status=RunStatus.COMPLETED)

    response = logged_in(superuser).post(
        url(Run, "changelist"),
        {"action": "cancel_runs", "_selected_action": [queued.pk, done.pk]},
        follow=True,
    )

    queued.refresh_from_db()
    assert queued.status == RunStatus.CANCELLED
    assert RunEvent.objects.filter(run=queued, type=ev.RUN_FAILED, payload__stage="cancelled").exists()
    texts = [str(message) for message in response.context["messages"]]
    assert "1 run(s) cancelled (running ones stop at their next step)." in texts
    assert any(f"run {done.pk}: the run is already completed" in text for text in texts)


def test_the_cancel_action_needs_the_change_run_permission(personas, world) -> None:
    grant(personas.operator, "view_run")
    client = logged_in(personas.operator)

    client.post(url(Run, "changelist"), {"action": "cancel_runs", "_selected_action": [world["run"].pk]})

    world["run"].refresh_from_db()
    assert world["run"].status == RunStatus.QUEUED
    grant(personas.operator, "change_run")
    client.post(url(Run, "changelist"), {"action": "cancel_runs", "_selected_action": [world["run"].pk]})
    world["run"].refresh_from_db()
    assert world["run"].status == RunStatus.CANCELLED


def test_connector_actions_are_only_edited_inline(world) -> None:
    assert ConnectorAction not in admin.site._registry


# --- roles ------------------------------------------------------------------------------------------


def _membership_inline(client: Client, org: Organization) -> Any:
    response = client.get(url(Organization, "change", org.pk))
    assert response.status_code == 200
    [formset] = [f for f in response.context["inline_admin_formsets"] if f.opts.model is Membership]
    return formset


def test_an_operator_cannot_grant_roles_in_their_organisation(personas) -> None:
    grant(
        personas.operator,
        "view_organization",
        "change_organization",
        "view_membership",
        "add_membership",
        "change_membership",
        "delete_membership",
    )
    formset = _membership_inline(logged_in(personas.operator), personas.org)
    assert not formset.has_add_permission and not formset.has_change_permission
    assert not formset.has_delete_permission


def test_an_organisation_admin_grants_roles(personas) -> None:
    grant(
        personas.admin,
        "view_organization",
        "change_organization",
        "view_membership",
        "add_membership",
        "change_membership",
    )
    formset = _membership_inline(logged_in(personas.admin), personas.org)
    assert formset.has_change_permission
    assert not formset.has_add_permission, "existing users join by accepting an invitation"


# --- agent owners ------------------------------------------------------------------------------------


def paying_agent_of(personas, owner: Any) -> Agent:
    from tests.approvals.kit import PAY_ARGS

    config = scripted(
        {"tool_calls": [{"name": "oa__purchase_pay", "arguments": dict(PAY_ARGS)}]},
        {"content": "Outcome: {last}"},
    )
    return make_agent(personas.org, owner, model_config_json=config)


def agent_change_form(personas, agent: Agent, **overrides: Any) -> dict[str, Any]:
    return agent_form(personas, agent.model_config_json, name=agent.name, **overrides)


@pytest.mark.django_db(transaction=True)
def test_it_ignores_an_operator_making_themselves_the_owner_so_they_never_become_approver(
    personas, resumes
) -> None:
    from approvals.models import ConfirmationRequest
    from tests.agents.engine_kit import Harness
    from tests.approvals.kit import pay_tool, set_policy, suspended_run

    agent = paying_agent_of(personas, personas.admin)
    grant(personas.operator, "view_agent", "change_agent")
    client = logged_in(personas.operator)
    form = client.get(url(Agent, "change", agent.pk)).context["adminform"].form
    assert "owner" not in form.fields, "the owner is read-only for an operator"

    response = client.post(
        url(Agent, "change", agent.pk), agent_change_form(personas, agent, owner=personas.operator.pk)
    )

    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.owner == personas.admin
    set_policy(personas, allow_agent_owner=True, allow_org_approvers=False)
    _run, request = suspended_run(personas, Harness(pay_tool()), agent=agent)
    approvers = set(ConfirmationRequest.objects.get(pk=request.pk).approvers.all())
    assert approvers == {personas.admin} and personas.operator not in approvers


def test_an_organisation_admin_changes_the_owner_of_an_agent(personas) -> None:
    agent = paying_agent_of(personas, personas.operator)
    grant(personas.admin, "view_agent", "change_agent")

    response = logged_in(personas.admin).post(
        url(Agent, "change", agent.pk), agent_change_form(personas, agent, owner=personas.approver.pk)
    )

    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.owner == personas.approver


def test_it_refuses_an_operator_creating_an_agent_owned_by_someone_else(personas) -> None:
    grant(personas.operator, "view_agent", "add_agent")
    client = logged_in(personas.operator)
    assert client.get(url(Agent, "add")).context["adminform"].form.initial["owner"] == personas.operator.pk

    response = client.post(
        url(Agent, "add"), agent_form(personas, scripted({"content": "x"}), owner=personas.admin.pk)
    )

    assert response.status_code == 200
    assert "Only an organisation admin may make someone else the owner" in page_text(response)
    assert not Agent.objects.filter(name="Invoice clerk").exists()
    response = client.post(url(Agent, "add"), agent_form(personas, scripted({"content": "x"})))
    assert response.status_code == 302
    assert Agent.objects.get(name="Invoice clerk").owner == personas.operator


# --- joining an organisation takes consent (#9 item 2) ------------------------------------------------


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


ORG_ADMIN_PERMISSIONS = (
    "view_organization",
    "change_organization",
    "view_membership",
    "add_membership",
    "change_membership",
    "delete_membership",
)


def test_it_refuses_an_organisation_admin_adding_an_existing_user_of_another_organisation(personas) -> None:
    grant(personas.admin, *ORG_ADMIN_PERMISSIONS)
    memberships = list(Membership.objects.filter(organization=personas.org).order_by("pk"))

    logged_in(personas.admin).post(
        url(Organization, "change", personas.org.pk),
        organization_form(personas.org, memberships, {"user": personas.stranger.pk, "role": "approver"}),
    )

    assert not Membership.objects.filter(user=personas.stranger, organization=personas.org).exists()


def test_an_organisation_admin_changes_a_members_role_but_not_whose_membership_it_is(personas) -> None:
    grant(personas.admin, *ORG_ADMIN_PERMISSIONS)
    memberships = list(Membership.objects.filter(organization=personas.org).order_by("pk"))
    data = organization_form(personas.org, memberships)
    row = next(n for n, m in enumerate(memberships) if m.user_id == personas.member.pk)
    data[f"memberships-{row}-role"] = "approver"
    data[f"memberships-{row}-user"] = personas.stranger.pk  # read-only: ignored

    response = logged_in(personas.admin).post(url(Organization, "change", personas.org.pk), data)

    assert response.status_code == 302
    changed = Membership.objects.get(pk=memberships[row].pk)
    assert (changed.user, changed.role) == (personas.member, "approver")
    assert not Membership.objects.filter(user=personas.stranger, organization=personas.org).exists()


def test_a_superuser_still_adds_a_member_directly(superuser, personas) -> None:
    memberships = list(Membership.objects.filter(organization=personas.org).order_by("pk"))

    response = logged_in(superuser).post(
        url(Organization, "change", personas.org.pk),
        organization_form(personas.org, memberships, {"user": personas.stranger.pk, "role": "member"}),
    )

    assert response.status_code == 302
    assert Membership.objects.filter(
        user=personas.stranger, organization=personas.org, role="member"
    ).exists()


DEEP_JSON = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("field", ["model_config_json", "builtin_tools", "secrets"])
def test_the_agent_admin_refuses_deeply_nested_json_as_a_field_error(superuser, personas, field: str) -> None:
    data = agent_form(personas, scripted({"content": "x"}), **{field: DEEP_JSON})

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors[field]
    assert any("nested more than 100 levels deep" in error for error in errors)
    assert not Agent.objects.filter(name="Invoice clerk").exists()


# --- the agent's model configuration and built-in tools as forms (issue 23, "Operator") -------------


def config_inputs(**values: str) -> dict[str, str]:
    """The model configuration as the agent page's inputs post it."""
    data = {"model_config_json___shown": "1", "model_config_json__advanced": ""}
    data.update({f"model_config_json__{name}": value for name, value in values.items()})
    return data


def test_the_agent_page_shows_the_model_configuration_and_builtin_tools_as_inputs(
    superuser, personas
) -> None:
    agent = make_agent(personas.org, personas.operator, builtin_tools=["calculator"])

    page = page_text(logged_in(superuser).get(url(Agent, "change", agent.pk)))

    assert '<select name="model_config_json__provider"' in page
    assert 'name="model_config_json__model"' in page and 'name="model_config_json__temperature"' in page
    assert "OpenAI-compatible API" in page and "Advanced (JSON)" in page
    assert 'name="builtin_tools__pick" value="calculator" checked' in page
    assert (
        'name="builtin_tools__pick" value="current_time">' in page and "<strong>Calculator</strong>" in page
    )
    assert "AGENT_DELEGATION_MAX_DEPTH" not in page
    assert "Calls nest at most 3 deep (a limit this deployment sets)" in page


def test_the_operator_configures_an_openai_model_through_the_inputs(superuser, personas) -> None:
    data = agent_form(personas, {}, secrets=json.dumps({"api_key": API_KEY}))
    data.pop("model_config_json")
    inputs = {"provider": "openai", "model": "gpt-test", "base_url": "https://llm.example.test/v1",
              "temperature": "0.2", "max_tokens": "800", "timeout": "", "max_retries": "",
              "script": "x"}  # fmt: skip
    data.update(config_inputs(**inputs))
    data["model_config_json__advanced"] = '{"retry_max_delay": 30, "params": {"top_p": 0.9}}'
    data.pop("builtin_tools")
    data.update({"builtin_tools___shown": "1", "builtin_tools__pick": ["current_time", "calculator"]})

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    agent = Agent.objects.get(name="Invoice clerk")
    assert agent.model_config_json == {
        "provider": "openai",
        "model": "gpt-test",
        "base_url": "https://llm.example.test/v1",
        "params": {"top_p": 0.9, "temperature": 0.2, "max_tokens": 800},
        "retry_max_delay": 30,
    }, "the scripted provider's script is not read for an openai model"
    assert agent.builtin_tools == ["current_time", "calculator"]


def test_settings_without_an_input_stay_as_they_were(superuser, personas) -> None:
    config = {**scripted({"content": "Hi."}), "custom": {"keep": True}}
    agent = make_agent(personas.org, personas.operator, model_config_json=config)

    page = page_text(logged_in(superuser).get(url(Agent, "change", agent.pk)))

    assert '"custom": {' in page and '"turns"' in page  # the script in its input, the rest in Advanced
    data = agent_form(personas, config, name=agent.name)
    data.pop("model_config_json")
    data.update(config_inputs(provider="scripted", script=json.dumps(config["script"])))
    data["model_config_json__advanced"] = json.dumps({"custom": {"keep": True}})
    assert logged_in(superuser).post(url(Agent, "change", agent.pk), data).status_code == 302
    agent.refresh_from_db()
    assert agent.model_config_json == config


def test_a_mistyped_input_is_told_by_its_name(superuser, personas) -> None:
    data = agent_form(personas, {})
    data.pop("model_config_json")
    data.update(config_inputs(provider="openai", model="gpt-test", temperature="warm"))

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["model_config_json"] == ["Temperature: enter a number"]


def test_an_api_key_typed_into_the_advanced_settings_is_refused_and_not_shown_back(
    superuser, personas
) -> None:
    data = agent_form(personas, {})
    data.pop("model_config_json")
    data.update(config_inputs(provider="openai", model="gpt-test"))
    data["model_config_json__advanced"] = json.dumps({"api_key": API_KEY})

    response = logged_in(superuser).post(url(Agent, "add"), data)

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["model_config_json"]
    assert any("put it in the agent's secrets" in error for error in errors)
    assert API_KEY not in response.content.decode()
