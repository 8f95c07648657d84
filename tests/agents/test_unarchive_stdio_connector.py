"""Bringing back an archived MCP server run here over stdio runs its command again: like creating
one, it needs the code-hooks permission (issue 44), in the service and in the admin's action."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.archiving import connector_archive, connector_unarchive
from agents.models import Connector
from fimone.errors import ServiceError
from tests.admin_kit import logged_in, page_text, url
from tests.agents.mcp_kit import http_connector, stdio_connector
from tests.console.admin_forms import grant

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived_stdio(governed, tmp_path: Path) -> Connector:
    connector = stdio_connector(governed.org, tmp_path / "records.jsonl")
    return connector_archive(connector=connector, user=governed.operator)


def fresh(user):
    """The user read again: permissions granted since are seen (Django caches them)."""
    return type(user).objects.get(pk=user.pk)


def test_an_operator_without_the_code_hooks_permission_cannot_unarchive_a_stdio_connector(
    governed, archived_stdio
) -> None:
    with pytest.raises(ServiceError) as refused:
        connector_unarchive(connector=archived_stdio, user=governed.operator)

    assert refused.value.code == "forbidden"
    assert "runs a command on this platform" in refused.value.message
    assert "'Can create or change command, python and http hooks' permission" in refused.value.message
    assert Connector.objects.get(pk=archived_stdio.pk).is_archived


def test_a_code_hooks_holder_unarchives_a_stdio_connector(governed, archived_stdio) -> None:
    grant(governed.operator, "manage_code_hooks")

    connector_unarchive(connector=archived_stdio, user=fresh(governed.operator))

    assert not Connector.objects.get(pk=archived_stdio.pk).is_archived


def test_an_mcp_server_over_http_is_unarchived_without_the_code_hooks_permission(governed) -> None:
    connector = http_connector(governed.org, "https://mcp.example.test/mcp")
    connector_archive(connector=connector, user=governed.operator)

    connector_unarchive(connector=connector, user=governed.operator)

    assert not Connector.objects.get(pk=connector.pk).is_archived


def test_the_unarchive_action_says_in_words_why_a_stdio_connector_stays_archived(
    governed, archived_stdio
) -> None:
    unarchive = {"action": "unarchive_selected", "_selected_action": [archived_stdio.pk]}

    refused = logged_in(governed.operator).post(url(Connector, "changelist"), unarchive, follow=True)

    text = page_text(refused)
    assert "Not unarchived: Records (records): this MCP server runs a command on this platform" in text, text
    assert Connector.objects.get(pk=archived_stdio.pk).is_archived

    grant(governed.operator, "manage_code_hooks")
    done = logged_in(fresh(governed.operator)).post(url(Connector, "changelist"), unarchive, follow=True)

    assert "1 unarchived: Records (records)" in page_text(done)
    assert not Connector.objects.get(pk=archived_stdio.pk).is_archived
