"""The admin's pages: every agents model is registered, and every page renders."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin

from agents import events as ev
from agents.models import (
    Agent,
    Connector,
    ConnectorAction,
    ConnectorCallLog,
    Conversation,
    Run,
    ShadowDecision,
    ToolExecution,
)
from agents.tools.base import readable_tool_name
from tenancy.models import Invitation, Organization
from tests.admin_kit import logged_in, page_text, url

# The services' dispatch of new runs to a worker is switched off (conftest.py).
pytestmark = pytest.mark.usefixtures("no_dispatch")


ADMIN_MODELS = (
    Organization,
    Agent,
    Connector,
    Conversation,
    Run,
    ToolExecution,
    Invitation,
    ConnectorCallLog,
    ShadowDecision,
)


def test_every_agents_and_tenancy_model_is_registered() -> None:
    # The organisation and invitation admins are the agents app's: an organisation's page holds
    # its enforced hooks.
    registered = {model for model in admin.site._registry if model._meta.app_label in ("agents", "tenancy")}

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


def test_connector_actions_are_only_edited_inline(world) -> None:
    assert ConnectorAction not in admin.site._registry


def test_the_tool_executions_list_names_each_tool_as_people_read_it(superuser, world) -> None:
    execution = ToolExecution.objects.get()
    listing = page_text(logged_in(superuser).get(url(ToolExecution, "changelist")))
    row = page_text(logged_in(superuser).get(url(ToolExecution, "change", execution.pk)))

    title = readable_tool_name(execution.tool_name)
    assert re.search(rf'<th class="field-tool"><a [^>]*>{title}</a></th>', listing)
    assert execution.tool_name not in listing  # the exact name stays on the row's page
    assert execution.tool_name in row
