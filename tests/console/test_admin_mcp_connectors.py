"""MCP connectors in the admin: a stdio server's command is code (only holders of the code-hooks
permission set it); every save lists the server's tools and says what changed; operators list
them again on demand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agents.models import Connector
from tests.admin_kit import logged_in, page_text, url
from tests.agents.mcp_kit import RECORDS_SERVER, records_over_http, stdio_connector
from tests.console.admin_forms import grant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_dispatch")]


def mcp_form(governed, **fields) -> dict:
    data = {
        "organization": governed.org.pk,
        "slug": "records",
        "name": "Records",
        "kind": "mcp",
        "base_url": "",
        "mcp_transport": "stdio",
        "command": "[]",
        "secrets": "",
        "timeout_seconds": "15",
        "actions-TOTAL_FORMS": "0",
        "actions-INITIAL_FORMS": "0",
        "actions-MIN_NUM_FORMS": "0",
        "actions-MAX_NUM_FORMS": "1000",
    }
    data.update(fields)
    return data


def stdio_form(governed, log: Path) -> dict:
    command = f'["{sys.executable}", "{RECORDS_SERVER}", "stdio"]'
    return mcp_form(governed, command=command, secrets=f'{{"env": {{"RECORDS_LOG": "{log}"}}}}')


def test_an_operator_without_the_code_hooks_permission_cannot_add_a_stdio_server(governed, tmp_path) -> None:
    response = logged_in(governed.operator).post(url(Connector, "add"), stdio_form(governed, tmp_path / "l"))

    assert response.status_code == 200
    assert "changing one needs the" in page_text(response)
    assert not Connector.objects.filter(slug="records").exists()


def test_a_stdio_server_added_by_a_code_hooks_holder_has_its_tools_listed(governed, tmp_path) -> None:
    grant(governed.operator, "manage_code_hooks")

    response = logged_in(governed.operator).post(
        url(Connector, "add"), stdio_form(governed, tmp_path / "l"), follow=True
    )

    text = page_text(response)
    assert response.status_code == 200, text
    connector = Connector.objects.get(slug="records")
    assert sorted(connector.actions.values_list("name", flat=True)) == [
        "delete_record",
        "fail",
        "lookup",
        "slow",
    ]
    listed = "New tools: records__delete_record, records__fail, records__lookup, records__slow."
    assert f"Records: {listed}" in text


def test_an_operator_changes_an_http_servers_settings_without_the_code_permission(governed, tmp_path) -> None:
    with records_over_http(tmp_path / "l") as (endpoint, _process):
        response = logged_in(governed.operator).post(
            url(Connector, "add"),
            mcp_form(governed, mcp_transport="http", base_url=endpoint),
            follow=True,
        )
    assert response.status_code == 200
    assert Connector.objects.get(slug="records").actions.count() == 4


def test_a_server_that_cannot_be_reached_is_saved_with_a_warning_not_an_error(governed) -> None:
    response = logged_in(governed.operator).post(
        url(Connector, "add"),
        mcp_form(governed, mcp_transport="http", base_url="http://127.0.0.1:9/mcp"),
        follow=True,
    )

    text = page_text(response)
    assert response.status_code == 200
    assert "its tools could not be listed" in text and "could not reach the MCP server" in text


def test_the_refresh_action_lists_the_tools_again_and_says_nothing_changed(governed, tmp_path) -> None:
    connector = stdio_connector(governed.org, tmp_path / "l")
    client = logged_in(governed.operator)
    refresh = {"action": "refresh_tools", "_selected_action": [connector.pk]}
    first = client.post(url(Connector, "changelist"), refresh, follow=True)
    assert "New tools:" in page_text(first)

    response = client.post(url(Connector, "changelist"), refresh, follow=True)

    assert "No change: 4 tool(s), as before." in page_text(response)


def test_a_stdio_servers_command_is_shown_on_the_list(governed, tmp_path) -> None:
    stdio_connector(governed.org, tmp_path / "l")

    response = logged_in(governed.operator).get(url(Connector, "changelist"))

    assert f"stdio: {sys.executable}" in page_text(response)
