"""Claude Code hook scripts on real MCP tools: a settings file whose matchers use Claude Code's
spelling (``mcp__workspace__Bash``, ``mcp__workspace__(Write|Edit)``), imported with
``manage.py hooks import-claude``, guards the tools of an MCP server (tests/mcp_servers/
workspace.py, over stdio) named like Claude Code's own. Block, allow and ask behave as Claude Code
documents them; the server hears only the calls that pass."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from agents import events as ev
from agents.models import Connector, HookDeclaration, Run, RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest
from approvals.services import confirmation_decide
from tests.agents.engine_kit import events_of
from tests.agents.mcp_kit import ToolboxHarness, listed, mcp_connector
from tests.approvals.kit import set_policy
from tests.personas import make_agent, scripted

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT = Path(__file__).resolve().parent.parent / "claude_hooks"
WORKSPACE = Path(__file__).resolve().parent.parent / "mcp_servers" / "workspace.py"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "workspace.jsonl"


def heard(log: Path) -> list[tuple[str, dict]]:
    if not log.exists():
        return []
    return [(e["tool"], e["args"]) for e in map(json.loads, log.read_text().splitlines())]


@pytest.fixture
def agent_on_workspace(personas, log):
    """An agent with the workspace server's tools and the imported Claude Code hooks; its model
    makes the given calls in turn."""

    def make(*steps: tuple[str, dict]):
        workspace = mcp_connector(
            personas.org,
            slug="workspace",
            mcp_transport=Connector.Transport.STDIO,
            command=[sys.executable, str(WORKSPACE)],
            secrets={"env": {"WORKSPACE_LOG": str(log)}},
        )
        listed(workspace)
        turns = [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in steps]
        agent = make_agent(
            personas.org, personas.operator, model_config_json=scripted(*turns, {"content": "{last}"})
        )
        agent.actions.set(workspace.actions.all())
        out = io.StringIO()
        call_command(
            "hooks", "import-claude", str(PROJECT / "settings_mcp.json"), "--agent", str(agent.pk),
            "--project-dir", str(PROJECT), stdout=out,
        )  # fmt: skip
        assert HookDeclaration.objects.filter(agent=agent, kind="command").count() == 3, out.getvalue()
        return agent

    return make


def test_the_bash_validator_blocks_a_dangerous_command_before_the_server_hears_it(
    personas, agent_on_workspace, log, resumes
) -> None:
    agent = agent_on_workspace(
        ("workspace__Bash", {"command": "rm -rf /"}), ("workspace__Bash", {"command": "ls docs"})
    )
    run = run_start(agent=agent, user=personas.member, input="tidy up")

    ToolboxHarness().execute(run)

    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["tool"] == "workspace__Bash" and "rm -rf" in blocked["error"]
    assert heard(log) == [("Bash", {"command": "ls docs"})]


def test_the_file_guard_denies_a_protected_write_and_the_server_never_hears_it(
    personas, agent_on_workspace, log, resumes
) -> None:
    secret = str(PROJECT / "secrets" / "token.txt")
    agent = agent_on_workspace(("workspace__Write", {"file_path": secret, "content": "x"}))
    run = run_start(agent=agent, user=personas.member, input="save the token")

    ToolboxHarness().execute(run)

    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["tool"] == "workspace__Write" and "protected" in blocked["error"].lower()
    assert heard(log) == []


def test_allow_lets_a_documentation_read_run_and_ask_waits_for_a_person(
    personas, agent_on_workspace, log, resumes
) -> None:
    set_policy(personas)
    agent = agent_on_workspace(
        ("workspace__Read", {"file_path": "/srv/project/docs/guide.md"}),
        ("workspace__Read", {"file_path": "/srv/project/src/app.py"}),
    )
    run = run_start(agent=agent, user=personas.member, input="read")

    assert ToolboxHarness().execute(run) == RunStatus.AWAITING_APPROVAL
    assert heard(log) == [("Read", {"file_path": "/srv/project/docs/guide.md"})], "allow: no one asked"
    request = ConfirmationRequest.objects.get()
    assert request.tool_args == {"file_path": "/srv/project/src/app.py"}

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    for run_id in resumes.run_ids:
        ToolboxHarness().resume(Run.objects.get(pk=run_id))

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert heard(log)[-1] == ("Read", {"file_path": "/srv/project/src/app.py"}), "ask: run once approved"
