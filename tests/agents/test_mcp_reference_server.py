"""The reference MCP server (``@modelcontextprotocol/server-everything``, installed by npm: see
the Makefile) as a connector over stdio: its tools listed, and an agent run that calls them with a
blocking hook and a person's approval in between."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agents import events as ev
from agents.models import Connector, ConnectorAction, Run, RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from tests.agents.engine_kit import events_of
from tests.agents.mcp_kit import ToolboxHarness, listed, mcp_connector
from tests.approvals.kit import set_policy
from tests.personas import make_agent, make_hook, scripted

pytestmark = pytest.mark.django_db(transaction=True)

EVERYTHING = (
    Path(__file__).resolve().parent.parent
    / "mcp_servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


@pytest.fixture
def everything(personas) -> Connector:
    node = shutil.which("node")
    if node is None or not EVERYTHING.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("the reference MCP server is not installed (make installs it with npm)")
        pytest.skip("the reference MCP server is not installed (needs Node and npm)")
    return mcp_connector(
        personas.org,
        slug="everything",
        mcp_transport=Connector.Transport.STDIO,
        command=[node, str(EVERYTHING), "stdio"],
        timeout_seconds=30,
    )


def test_its_tools_are_listed_with_what_the_server_says_of_them(everything) -> None:
    actions = listed(everything)

    assert {"echo", "get-sum", "get-env", "get-tiny-image"} <= set(actions)
    echo = actions["echo"]
    assert echo.tool_name == "everything__echo" and echo.annotations["readOnlyHint"] is True
    assert (echo.is_write, echo.requires_confirmation) == (False, False)
    assert echo.parameters_schema["properties"]["message"]["type"] == "string"


def test_an_agent_calls_it_through_a_blocking_hook_and_an_approval(personas, everything, resumes) -> None:
    listed(everything)
    set_policy(personas)
    # An operator asks for a person before any sum, and the organisation keeps env vars private.
    ConnectorAction.objects.filter(connector=everything, remote_name="get-sum").update(
        requires_confirmation=True
    )
    make_hook(
        personas.org,
        "deny_tools",
        params={"tools": ["*"], "message": "No env here."},
        matcher="mcp__everything__get-env",
    )
    turns = [
        {"tool_calls": [{"name": "everything__get-env", "arguments": {}}]},
        {"tool_calls": [{"name": "everything__echo", "arguments": {"message": "hello"}}]},
        {"tool_calls": [{"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}}]},
        {"content": "Done: {last}"},
    ]
    agent = make_agent(personas.org, personas.operator, model_config_json=scripted(*turns))
    agent.actions.set(everything.actions.all())
    run = run_start(agent=agent, user=personas.member, input="go")

    assert ToolboxHarness().execute(run) == RunStatus.AWAITING_APPROVAL
    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["tool"] == "everything__get-env" and blocked["error"] == "No env here."
    [echoed] = events_of(run, ev.TOOL_FINISHED)
    assert echoed["observation"] == "Echo: hello"

    request = ConfirmationRequest.objects.get()
    assert request.tool_name == "everything__get-sum" and request.tool_args == {"a": 2, "b": 3}
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    for run_id in resumes.run_ids:
        ToolboxHarness().resume(Run.objects.get(pk=run_id))

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    summed = events_of(run, ev.TOOL_FINISHED)[-1]
    assert summed["tool"] == "everything__get-sum" and summed["status"] == "succeeded"
    assert "5" in summed["observation"]
    assert run.output.startswith("Done:") and "5" in run.output, "the model read the server's sum"
