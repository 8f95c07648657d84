"""Staff users see, and act on, only the organisations they operate or administer."""

from __future__ import annotations

import pytest

from agents.models import Agent, Connector, Run
from tenancy.models import Organization
from tests.admin_kit import logged_in, page_text, url
from tests.console.admin_forms import agent_form, grant
from tests.personas import scripted

# The services' dispatch of new runs to a worker is switched off (conftest.py).
pytestmark = pytest.mark.usefixtures("no_dispatch")


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
