"""HTTP connector action tools: path arguments fill the action's template, URL-quoted within one
segment, and any value or template that would leave the connector's base path is refused unsent."""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

from agents.models import Connector
from agents.tools.base import ToolError
from tests.agents.tools_kit import SECRET_HEADERS, RecordingServer, call, connector, http_tool, service
from tests.personas import Personas, make_action, make_agent, make_http_connector

__all__ = ["connector", "service"]


def test_path_placeholders_are_filled_from_the_arguments_and_url_quoted(
    connector: Connector, service: RecordingServer
) -> None:
    tool = http_tool(connector, "notes", path="items/{item_id}/notes/{n}")
    call(tool, {"item_id": "a b/c?d", "n": 7, "q": "x"})
    (seen,) = service.seen
    assert seen.path == "/api/items/a%20b%2Fc%3Fd/notes/7"
    assert seen.query == {"q": ["x"]}


def test_a_missing_path_argument_is_a_tool_error_and_nothing_is_sent(
    connector: Connector, service: RecordingServer
) -> None:
    tool = http_tool(connector, "notes", path="items/{item_id}/notes")
    with pytest.raises(ToolError, match=r"missing argument.*item_id"):
        call(tool, {"q": "x"})
    assert service.seen == []


HOSTILE_PATH_VALUES = [
    "..",
    ".",
    "%2e%2e",
    ".%2E",
    "%2E.",
    "%2e",
    "%252e%252e",  # decoded twice by a proxy and then the service
    "../admin",
    "..\\admin",
    "a/../../x",
    "x/..",
    "%2e%2e%2fadmin",
    "\uff0e\uff0e",  # fullwidth full stops, folded to ".." by NFKC-normalising servers
    " .. ",
    "",
]


@pytest.mark.parametrize("value", HOSTILE_PATH_VALUES)
def test_it_refuses_path_arguments_that_would_leave_the_path_and_sends_nothing(
    connector: Connector, service: RecordingServer, value: str
) -> None:
    tool = http_tool(connector, "purchase_get", path="/purchases/{id}")

    with pytest.raises(ToolError) as refused:
        call(tool, {"id": value})

    assert service.seen == []
    assert str(refused.value).startswith("refused: the argument")
    assert "'id'" in str(refused.value) and "nothing was sent" in str(refused.value)


@pytest.mark.parametrize(
    ("template", "args"),
    [
        ("{a}", {"a": ".."}),  # straight to the service's root with the connector's credentials
        ("{a}{b}", {"a": ".", "b": "."}),
        ("{a}.", {"a": ""}),  # each value harmless, together a dot segment
        ("files/{name}/raw", {"name": ""}),
    ],
)
def test_it_refuses_values_that_together_with_the_template_leave_the_path(
    connector: Connector, service: RecordingServer, template: str, args: dict[str, str]
) -> None:
    with pytest.raises(ToolError, match=r"^refused: .*nothing was sent$"):
        call(http_tool(connector, "fetch", path=template), args)

    assert service.seen == []


@pytest.mark.parametrize(
    "template",
    ["../admin", "/../../etc/passwd", "x/../../../..//evil.example/x", "%2e%2e/admin", "a/%2E%2E/%2e%2e/b"],
)
def test_it_refuses_a_template_whose_final_url_leaves_the_base(
    connector: Connector, service: RecordingServer, template: str
) -> None:
    tool = http_tool(connector, "escape", path=template)

    with pytest.raises(ToolError, match=r"^refused: GET .*outside the connector's base URL \(path '/api'\)"):
        call(tool, {})

    assert service.seen == []


@pytest.mark.parametrize(
    "value",
    ["a/b", "a b", "Ünïcødé ✓", "...", ".hidden", "v1.2", "a..b", "..a", "50%", "%2F", "x?y#z", "0"],
)
def test_ordinary_path_values_work_and_stay_inside_one_segment(
    connector: Connector, service: RecordingServer, value: str
) -> None:
    tool = http_tool(connector, "item_notes", path="items/{id}/notes")

    assert call(tool, {"id": value}) == {"ok": True}

    (seen,) = service.seen
    parts = seen.path.split("/")
    assert parts[:3] == ["", "api", "items"] and parts[4:] == ["notes"] and len(parts) == 5
    assert unquote(parts[3]) == value


def test_a_dot_in_a_templates_query_is_no_path_and_is_sent(
    connector: Connector, service: RecordingServer
) -> None:
    call(http_tool(connector, "search", method="POST", path="search?q={q}"), {"q": ".."})

    (seen,) = service.seen
    assert (seen.path, seen.query) == ("/api/search", {"q": [".."]})


@pytest.mark.django_db
def test_a_refused_path_reaches_the_model_as_an_observation_saying_why(
    personas: Personas, service: RecordingServer
) -> None:
    from asgiref.sync import async_to_sync

    from agents.engine.runner import run_execute
    from agents.models import RunEvent, ToolExecution
    from agents.services import run_start
    from tests.personas import scripted

    connector = make_http_connector(personas.org, service.base_url, secrets={"headers": SECRET_HEADERS})
    action = make_action(connector, "purchase_get", path="purchases/{id}")
    turns = ({"tool_calls": [{"name": "oa__purchase_get", "arguments": {"id": ".."}}]}, {"content": "Done."})
    agent = make_agent(personas.org, personas.operator, model_config_json=scripted(*turns), actions=[action])
    run = run_start(agent=agent, user=personas.member, input="show me the purchase")

    async_to_sync(run_execute)(run.pk)

    assert service.seen == []
    execution = ToolExecution.objects.get(run=run)
    assert execution.status == ToolExecution.Status.FAILED
    assert "refused: the argument 'id'" in json.dumps(execution.result)
    assert RunEvent.objects.filter(run=run).exists()
