"""An agent's owner in the admin: only an organisation admin makes someone else the owner, so an
operator never makes themselves an approver."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Agent
from tests.admin_kit import logged_in, page_text, url
from tests.console.admin_forms import agent_form, grant
from tests.personas import make_agent, scripted

# The services' dispatch of new runs to a worker is switched off (conftest.py).
pytestmark = pytest.mark.usefixtures("no_dispatch")


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


@pytest.mark.django_db
def test_an_operator_reads_the_owner_and_the_actions_by_name_with_no_link_they_may_not_open(personas) -> None:
    from agents.models import Connector
    from tests.personas import make_action

    agent = make_agent(personas.org, personas.admin, name="Payer")
    connector = Connector.objects.create(
        organization=personas.org,
        name="Payments desk",
        slug="pd",
        kind="http",
        base_url="https://pay.example.test",
    )
    make_action(connector, "purchase_pay", method="POST", path="/pay", display_name="Pay a purchase")
    grant(personas.operator, "view_agent", "change_agent")

    response = logged_in(personas.operator).get(url(Agent, "change", agent.pk))
    page = page_text(response)

    assert f'href="/admin/auth/user/{personas.admin.pk}/change/"' not in page  # a 403 for them
    assert personas.admin.username in page
    choices = [label for _value, label in response.context["adminform"].form.fields["actions"].choices]
    assert "Pay a purchase — Payments desk" in choices and not any("pd__" in str(c) for c in choices)
