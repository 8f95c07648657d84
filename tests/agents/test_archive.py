"""Nothing with history is deleted (docs/design.md §1.9): history rows refuse cascades, and agents,
connectors and organisations are archived instead (they stop running, their history stays)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import ProtectedError
from rest_framework.test import APIClient

from agents import events as ev
from agents.archiving import (
    agent_archive,
    agent_unarchive,
    connector_archive,
    connector_unarchive,
    organization_archive,
    organization_unarchive,
)
from agents.models import (
    Agent,
    Connector,
    ConnectorAction,
    Conversation,
    Run,
    RunEvent,
    RunMessage,
    RunStatus,
    ToolExecution,
)
from agents.services import run_start
from agents.tools.toolbox import tools_for_agent
from fimone.errors import ServiceError
from tenancy.models import Organization
from tests.admin_kit import grant, logged_in, page_text, url
from tests.agents.archiving_race import a_start_waits_on_a_lock, start_while_an_archiving_commits
from tests.agents.engine_kit import Harness, RecordingTool
from tests.personas import make_action, make_agent, make_http_connector

User = get_user_model()
HISTORY_MODELS = (Agent, Conversation, Run, RunEvent, RunMessage, ToolExecution, Connector, ConnectorAction)


@pytest.fixture(autouse=True)
def no_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agents.services.dispatch_execute", lambda run_id: None)


@pytest.fixture
def world(personas) -> dict[str, Any]:
    """An agent with one run that has events, messages and a tool execution of its connector."""
    connector = make_http_connector(personas.org, "https://oa.example.test")
    action = make_action(connector, "purchase_list")
    agent = make_agent(personas.org, personas.operator, actions=[action])
    run = run_start(agent=agent, user=personas.member, input="list the purchases")
    RunEvent.objects.create(run=run, seq=1, type=ev.RUN_STARTED, payload={"agent_id": agent.pk})
    RunMessage.objects.create(run=run, index=0, message={"role": "user", "content": "list the purchases"})
    ToolExecution.objects.create(
        run=run, tool_call_id="call-1", tool_name=action.tool_name, args={}, args_sha256="0" * 64
    )
    return {"connector": connector, "action": action, "agent": agent, "run": run}


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in HISTORY_MODELS}


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


# --- deleting is refused --------------------------------------------------------------------------


def test_it_refuses_to_delete_an_agent_with_runs_from_a_shell(world) -> None:
    before = counts()

    with pytest.raises(ProtectedError):
        world["agent"].delete()
    with pytest.raises(ProtectedError):
        Agent.objects.filter(pk=world["agent"].pk).delete()

    assert counts() == before


def test_it_refuses_to_delete_a_run_its_conversation_or_a_parent_run_with_history(personas, world) -> None:
    run = world["run"]
    parent = Run.objects.create(conversation=run.conversation, agent=run.agent, user=run.user, input="plan")
    Run.objects.filter(pk=run.pk).update(parent_run=parent)  # the parent has no events of its own
    before = counts()

    for deletion in (
        run.delete,
        Run.objects.filter(pk=run.pk).delete,
        run.conversation.delete,
        parent.delete,
        RunEvent.objects.get(run=run).run.delete,
    ):
        with pytest.raises(ProtectedError):
            deletion()

    assert counts() == before


@pytest.mark.parametrize("who", ["member", "operator"], ids=["who ran", "who owns the agent"])
def test_it_refuses_to_delete_a_user_with_runs_or_agents(personas, world, who) -> None:
    before = counts()

    with pytest.raises(ProtectedError):
        getattr(personas, who).delete()

    assert counts() == before
    assert User.objects.filter(pk=getattr(personas, who).pk).exists()


def test_it_refuses_to_delete_an_organisation_with_history_but_not_one_without(personas, world) -> None:
    before = counts()

    with pytest.raises(ProtectedError):
        personas.org.delete()

    assert counts() == before
    empty = Organization.objects.create(name="Initech")
    make_agent(empty, personas.stranger, name="never ran")
    empty.delete()  # configuration without history still goes with its organisation
    assert not Agent.objects.filter(name="never ran").exists()


def test_it_refuses_to_delete_a_connector_whose_tools_ran(personas, world) -> None:
    before = counts()

    with pytest.raises(ProtectedError, match="Archive it instead"):
        world["connector"].delete()
    with pytest.raises(ProtectedError):
        Connector.objects.filter(pk=world["connector"].pk).delete()

    assert counts() == before


def test_a_connector_without_history_is_deleted_with_its_actions(personas, world) -> None:
    # Same slug prefix in spirit, but another tool prefix and another tenant: neither is history
    # of these connectors.
    sibling = make_http_connector(personas.org, "https://oa.example.test", slug="oa_archive")
    make_action(sibling, "purchase_list")
    globex = make_http_connector(personas.other_org, "https://oa.example.test", slug="oa")
    make_action(globex, "purchase_list")

    sibling.delete()
    globex.delete()

    assert not Connector.objects.filter(pk__in=[sibling.pk, globex.pk]).exists()
    assert ConnectorAction.objects.filter(connector=world["connector"]).count() == 1


# --- archived agents and organisations cannot run ------------------------------------------------


def test_it_refuses_to_start_a_run_on_an_archived_agent(personas, world) -> None:
    agent_archive(agent=world["agent"], user=personas.operator)

    with pytest.raises(ServiceError) as refused:
        run_start(agent=world["agent"], user=personas.member, input="hello")

    assert refused.value.code == "conflict"
    assert refused.value.message == "this agent is archived and cannot run"


def test_the_api_refuses_a_run_on_an_archived_agent_with_a_409_and_a_message(personas, world) -> None:
    agent_archive(agent=world["agent"], user=personas.operator)
    runs_before = Run.objects.count()

    response = api(personas.member).post(
        f"/api/agents/{world['agent'].pk}/runs/", {"input": "hello"}, format="json"
    )

    assert response.status_code == 409
    assert response.json() == {"detail": "this agent is archived and cannot run"}
    assert Run.objects.count() == runs_before


def test_the_api_refuses_a_run_on_an_agent_of_an_archived_organisation(personas, world) -> None:
    organization_archive(organization=personas.org, user=personas.admin)

    response = api(personas.member).post(
        f"/api/agents/{world['agent'].pk}/runs/", {"input": "hello"}, format="json"
    )

    assert response.status_code == 409
    assert "organisation is archived" in response.json()["detail"]
    with pytest.raises(ServiceError):
        run_start(agent=world["agent"], user=personas.member, input="hello")


def test_a_stranger_still_gets_a_404_for_an_archived_agent(personas, world) -> None:
    agent_archive(agent=world["agent"], user=personas.operator)

    response = api(personas.stranger).post(
        f"/api/agents/{world['agent'].pk}/runs/", {"input": "hello"}, format="json"
    )

    assert response.status_code == 404


def test_archived_agents_and_the_agents_of_archived_organisations_are_not_listed(personas, world) -> None:
    other = make_agent(personas.org, personas.operator, name="Invoice clerk")
    globex = make_agent(personas.other_org, personas.stranger, name="Globex clerk")

    agent_archive(agent=world["agent"], user=personas.operator)
    listed = [agent["name"] for agent in api(personas.member).get("/api/agents/").json()]
    assert listed == ["Invoice clerk"]

    organization_archive(organization=personas.other_org, user=User.objects.create_superuser("root", "r@x.y"))
    assert api(personas.stranger).get("/api/agents/").json() == []
    assert globex.pk and other.pk


def test_an_archived_agents_runs_stay_readable_through_the_api(personas, world) -> None:
    agent_archive(agent=world["agent"], user=personas.operator)
    run = world["run"]

    detail = api(personas.member).get(f"/api/runs/{run.pk}/")
    events = api(personas.member).get(f"/api/runs/{run.pk}/events/")

    assert detail.status_code == 200 and detail.json()["id"] == run.pk
    assert events.status_code == 200
    assert [e["type"] for e in events.json()["events"]] == [ev.RUN_STARTED, ev.RUN_FAILED]


def test_archiving_an_agent_ends_its_runs_in_flight(personas, world) -> None:
    queued = world["run"]
    running = run_start(agent=world["agent"], user=personas.approver, input="still going")
    Run.objects.filter(pk=running.pk).update(status=RunStatus.RUNNING)
    done = run_start(agent=world["agent"], user=personas.admin, input="done")
    Run.objects.filter(pk=done.pk).update(status=RunStatus.COMPLETED)

    agent_archive(agent=world["agent"], user=personas.operator)

    queued.refresh_from_db()
    running.refresh_from_db()
    done.refresh_from_db()
    assert queued.status == RunStatus.CANCELLED and queued.error == "the agent was archived by oscar"
    assert RunEvent.objects.filter(run=queued, type=ev.RUN_FAILED, payload__stage="cancelled").exists()
    assert running.status == RunStatus.RUNNING and running.cancel_requested, "stops at its next step"
    assert done.status == RunStatus.COMPLETED and not done.cancel_requested


def test_archiving_an_organisation_ends_the_runs_of_all_its_agents(personas, world) -> None:
    organization_archive(organization=personas.org, user=personas.admin)

    world["run"].refresh_from_db()
    personas.org.refresh_from_db()
    assert world["run"].status == RunStatus.CANCELLED
    assert world["run"].error == "the organisation was archived by adam"
    assert personas.org.archived_by == personas.admin and personas.org.archived_at is not None


def test_a_run_claimed_after_its_agent_was_archived_fails_before_any_llm_call(personas, world) -> None:
    run = run_start(agent=world["agent"], user=personas.approver, input="list them")
    # As if the archiving committed between the run's start and its claim.
    Agent.objects.filter(pk=world["agent"].pk).update(archived_at=run.created_at)
    harness = Harness(RecordingTool("oa__purchase_list"))

    assert harness.execute(run) == RunStatus.FAILED

    run.refresh_from_db()
    assert run.error == "this agent is archived and cannot run"
    assert harness.llm_requests == []


def test_unarchiving_lets_the_agent_run_again_but_restarts_nothing(personas, world) -> None:
    agent_archive(agent=world["agent"], user=personas.operator)
    agent_unarchive(agent=world["agent"], user=personas.operator)

    world["run"].refresh_from_db()
    assert world["run"].status == RunStatus.CANCELLED
    assert run_start(agent=world["agent"], user=personas.member, input="again").status == RunStatus.QUEUED
    organization_archive(organization=personas.org, user=personas.admin)
    organization_unarchive(organization=personas.org, user=personas.admin)
    assert run_start(agent=world["agent"], user=personas.approver, input="again").status == RunStatus.QUEUED


@pytest.mark.parametrize("who", ["member", "approver", "auditor", "stranger"])
def test_it_refuses_archiving_by_anyone_who_does_not_operate_the_organisation(personas, world, who) -> None:
    user = getattr(personas, who)

    for archive, target in (
        (agent_archive, {"agent": world["agent"]}),
        (connector_archive, {"connector": world["connector"]}),
        (organization_archive, {"organization": personas.org}),
    ):
        with pytest.raises(ServiceError) as refused:
            archive(**target, user=user)
        assert refused.value.code == "not_found"

    for model in (Agent, Connector, Organization):
        assert not model.objects.filter(archived_at__isnull=False).exists()
    world["run"].refresh_from_db()
    assert world["run"].status == RunStatus.QUEUED


def test_it_refuses_an_operator_archiving_the_whole_organisation(personas) -> None:
    with pytest.raises(ServiceError) as refused:
        organization_archive(organization=personas.org, user=personas.operator)

    assert refused.value.code == "not_found"
    personas.org.refresh_from_db()
    assert personas.org.archived_at is None


def test_archiving_twice_or_unarchiving_what_is_not_archived_is_a_conflict(personas, world) -> None:
    with pytest.raises(ServiceError) as refused:
        agent_unarchive(agent=world["agent"], user=personas.operator)
    assert refused.value.code == "conflict"
    agent_archive(agent=world["agent"], user=personas.operator)
    with pytest.raises(ServiceError) as refused:
        agent_archive(agent=world["agent"], user=personas.admin)
    assert refused.value.code == "conflict"
    assert Agent.objects.get(pk=world["agent"].pk).archived_by == personas.operator


# --- archived connectors --------------------------------------------------------------------------


def test_an_archived_connectors_tools_are_not_offered(personas, world) -> None:
    builtin = "current_time"
    Agent.objects.filter(pk=world["agent"].pk).update(builtin_tools=[builtin])
    agent = Agent.objects.get(pk=world["agent"].pk)
    assert set(tools_for_agent(agent)) == {"oa__purchase_list", builtin}

    connector_archive(connector=world["connector"], user=personas.operator)
    assert set(tools_for_agent(agent)) == {builtin}

    connector_unarchive(connector=world["connector"], user=personas.operator)
    assert set(tools_for_agent(agent)) == {"oa__purchase_list", builtin}


# --- the admin --------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [Agent, Connector, Organization], ids=lambda model: model.__name__)
def test_the_admin_offers_no_way_to_delete_agents_connectors_or_organisations(
    superuser, personas, world, model
) -> None:
    obj = {Agent: world["agent"], Connector: world["connector"], Organization: personas.org}[model]
    client = logged_in(superuser)
    before = counts()

    assert client.get(url(model, "delete", obj.pk)).status_code == 403
    assert client.post(url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403
    listing = client.get(url(model, "changelist"))
    assert "delete_selected" not in [
        name for name, _label in listing.context["action_form"].fields["action"].choices
    ]
    client.post(
        url(model, "changelist"), {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"}
    )
    assert url(model, "delete", obj.pk) not in page_text(client.get(url(model, "change", obj.pk)))

    assert counts() == before
    assert model.objects.filter(pk=obj.pk).exists()


def test_it_refuses_deleting_a_user_with_runs_in_the_admin_with_a_page(superuser, personas, world) -> None:
    client = logged_in(superuser)

    page = client.get(url(User, "delete", personas.member.pk))
    refused = client.post(url(User, "delete", personas.member.pk), {"post": "yes"})

    assert page.status_code == 200 and refused.status_code == 200
    for response in (page, refused):
        text = page_text(response)
        assert "Cannot delete user" in text and "run" in text.split("Cannot delete user")[-1]
    assert User.objects.filter(pk=personas.member.pk).exists()
    assert Run.objects.filter(user=personas.member).count() == 1


def test_the_archive_actions_archive_and_unarchive_the_operators_agents(personas, world) -> None:
    grant(personas.operator, "view_agent", "change_agent", app_label="agents")
    client = logged_in(personas.operator)
    agent = world["agent"]

    response = client.post(
        url(Agent, "changelist"), {"action": "archive_selected", "_selected_action": [agent.pk]}, follow=True
    )

    agent.refresh_from_db()
    assert agent.archived_by == personas.operator
    assert f"1 archived: {agent.name}" in [str(m) for m in response.context["messages"]]
    world["run"].refresh_from_db()
    assert world["run"].status == RunStatus.CANCELLED
    client.post(url(Agent, "changelist"), {"action": "unarchive_selected", "_selected_action": [agent.pk]})
    agent.refresh_from_db()
    assert agent.archived_at is None and agent.archived_by is None


def test_the_archive_action_cannot_reach_another_organisations_agent(personas, world) -> None:
    grant(personas.operator, "view_agent", "change_agent", app_label="agents")
    globex = make_agent(personas.other_org, personas.stranger, name="Globex clerk")

    logged_in(personas.operator).post(
        url(Agent, "changelist"), {"action": "archive_selected", "_selected_action": [globex.pk]}
    )

    globex.refresh_from_db()
    assert globex.archived_at is None


def test_the_archive_action_needs_the_change_permission(personas, world) -> None:
    grant(personas.operator, "view_agent", "view_connector", app_label="agents")
    client = logged_in(personas.operator)

    client.post(
        url(Agent, "changelist"), {"action": "archive_selected", "_selected_action": [world["agent"].pk]}
    )
    client.post(
        url(Connector, "changelist"),
        {"action": "archive_selected", "_selected_action": [world["connector"].pk]},
    )

    assert not Agent.objects.filter(archived_at__isnull=False).exists()
    assert not Connector.objects.filter(archived_at__isnull=False).exists()


def test_the_organisation_archive_action_reports_an_operators_refusal(personas) -> None:
    grant(personas.operator, "view_organization", "change_organization", app_label="tenancy")

    response = logged_in(personas.operator).post(
        url(Organization, "changelist"),
        {"action": "archive_selected", "_selected_action": [personas.org.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert "Not archived: Acme: not found" in [str(m) for m in response.context["messages"]]
    personas.org.refresh_from_db()
    assert personas.org.archived_at is None


def test_the_connector_archive_action_withdraws_its_tools(personas, world) -> None:
    grant(personas.operator, "view_connector", "change_connector", app_label="agents")

    logged_in(personas.operator).post(
        url(Connector, "changelist"),
        {"action": "archive_selected", "_selected_action": [world["connector"].pk]},
    )

    assert tools_for_agent(Agent.objects.get(pk=world["agent"].pk)) == {}


def test_an_archived_agent_and_its_runs_stay_readable_in_the_admin(superuser, personas, world) -> None:
    agent_archive(agent=world["agent"], user=personas.operator)
    client = logged_in(superuser)

    agent_page = client.get(url(Agent, "change", world["agent"].pk))
    run_page = client.get(url(Run, "change", world["run"].pk))
    archived_only = client.get(url(Agent, "changelist"), {"archived_at__isnull": "False"})

    assert agent_page.status_code == 200 and "oscar" in page_text(agent_page)
    assert run_page.status_code == 200 and ev.RUN_STARTED in page_text(run_page)
    assert list(archived_only.context["cl"].result_list) == [world["agent"]]


def test_the_archive_fields_cannot_be_edited_by_hand(superuser, personas) -> None:
    form = logged_in(superuser).get(url(Organization, "change", personas.org.pk)).context["adminform"].form

    assert "archived_at" not in form.fields and "archived_by" not in form.fields


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)  # two transactions at once, each on a connection of its own
def test_a_run_start_waiting_on_an_archiving_organisation_sees_it_archived(personas) -> None:
    """The archiving locks the organisation's agents; a start waiting for its agent's lock reads
    the organisation only once it has that lock, so it sees the archiving that held it."""
    agent = make_agent(personas.org, personas.operator)

    outcome = start_while_an_archiving_commits(
        organization=personas.org,
        admin=personas.admin,
        start=lambda: run_start(agent=agent, user=personas.member, input="hi", dispatch=False),
        waits_on_lock=a_start_waits_on_a_lock,
    )

    assert outcome == {"refused": "conflict"}
    assert not Run.objects.exists()
