"""Claude Code hook scripts, imported with ``manage.py hooks import-claude`` from a settings file,
run on an agent whose tools are named like Claude Code's (``shell__Bash``, ``files__Write``,
``files__Read``): block, allow and ask behave as Claude Code documents them — and a script that
crashes or times out blocks the call here, where Claude Code would let it run.

The scripts (tests/claude_hooks/) were written for these tests: a Bash command validator
(exit 2, the reason on stderr), a file guard (``permissionDecision: deny``) and an auto-approver
(``allow`` for reads of documentation, ``ask`` for the rest).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from agents import events as ev
from agents.models import Agent, HookDeclaration, RunStatus
from agents.services import run_start
from approvals.models import ConfirmationRequest, ConfirmationStatus
from approvals.services import confirmation_decide
from tests.agents.engine_kit import Harness, RecordingTool, events_of
from tests.approvals.kit import set_policy
from tests.personas import make_agent, scripted

# The gate's requests are read by other connections, and verdicts act after commit. Runs are
# driven here, never dispatched to a background executor (``resumes``).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("resumes")]

PROJECT = Path(__file__).resolve().parent.parent / "claude_hooks"
SETTINGS = PROJECT / "settings.json"
SECRETS = PROJECT / "secrets"


def claude_tools(*, read_requires_confirmation: bool = False) -> dict[str, RecordingTool]:
    def schema(*names: str) -> dict[str, Any]:
        return {"type": "object", "properties": {n: {"type": "string"} for n in names}}

    return {
        "bash": RecordingTool("shell__Bash", result="done", parameters=schema("command")),
        "write": RecordingTool("files__Write", result="written", parameters=schema("file_path", "content")),
        "read": RecordingTool(
            "files__Read",
            result="# Guide\nHello.",
            parameters=schema("file_path"),
            requires_confirmation=read_requires_confirmation,
        ),
    }


def calls(*steps: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """The scripted model: one tool call per turn, then an answer quoting each observation."""
    turns = [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in steps]
    return scripted(*turns, {"content": "Outcome: {last}"})


def agent_with_claude_hooks(personas, *steps: tuple[str, dict[str, Any]], settings: Path = SETTINGS) -> Agent:
    agent = make_agent(personas.org, personas.operator, model_config_json=calls(*steps))
    out = io.StringIO()
    call_command(
        "hooks", "import-claude", str(settings), "--agent", str(agent.pk),
        "--project-dir", str(settings.parent), stdout=out,
    )  # fmt: skip
    assert "imported" in out.getvalue()
    return agent


def run_it(personas, agent: Agent, tools: dict[str, RecordingTool]):
    harness = Harness(*tools.values())
    run = run_start(agent=agent, user=personas.member, input="tidy up the project")
    status = harness.execute(run)
    run.refresh_from_db()
    return run, status, harness


def test_the_settings_file_imports_three_command_hooks_with_the_project_directory_filled_in(personas) -> None:
    agent = agent_with_claude_hooks(personas)

    rows = list(HookDeclaration.objects.filter(agent=agent).order_by("pk"))
    assert [(r.kind, r.point, r.name) for r in rows] == [
        ("command", "PreToolUse", "bash_validator.py (PreToolUse Bash)"),
        ("command", "PreToolUse", "file_guard.py (PreToolUse Write|Edit)"),
        ("command", "PreToolUse", "auto_approve.py (PreToolUse Read|Write|Edit)"),
    ]
    assert rows[1].params["argv"] == [
        str(PROJECT / "file_guard.py"), "--protect", str(SECRETS), "--protect", "/etc",
    ]  # fmt: skip
    assert [r.timeout for r in rows] == [5.0, 5.0, 5.0]


def test_the_bash_validator_blocks_a_dangerous_command_with_its_reason_and_lets_a_safe_one_run(
    personas,
) -> None:
    tools = claude_tools()
    agent = agent_with_claude_hooks(
        personas, ("shell__Bash", {"command": "rm -rf /"}), ("shell__Bash", {"command": "ls -la docs"})
    )

    run, status, _ = run_it(personas, agent, tools)

    assert status == RunStatus.COMPLETED
    assert tools["bash"].calls == [{"command": "ls -la docs"}], "only the safe command ran"
    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "bash_validator.py (PreToolUse Bash)"
    assert blocked["error"] == (
        "Refused: `rm -rf /` deletes a root or home directory. "
        "If it is really intended, the user runs it by hand."
    )
    assert not ConfirmationRequest.objects.exists(), "Bash is not the auto-approver's: nobody is asked"


@pytest.mark.parametrize(
    ("path", "why"),
    [
        (str(PROJECT / ".env"), "is an environment file"),
        (str(PROJECT / "config" / ".env.production"), "is an environment file"),
        (str(SECRETS / "deploy.key"), f"is inside {SECRETS}, which is protected"),
        (
            str(PROJECT / "notes" / ".." / "secrets" / "deploy.key"),
            f"is inside {SECRETS}, which is protected",
        ),
        ("/etc/hosts", "is inside /etc, which is protected"),
        ("notes/todo.md", "is not an absolute path"),
    ],
)
def test_the_file_guard_denies_writes_to_env_files_and_protected_directories(personas, path, why) -> None:
    tools = claude_tools()
    agent = agent_with_claude_hooks(personas, ("files__Write", {"file_path": path, "content": "x"}))

    run, status, _ = run_it(personas, agent, tools)

    assert status == RunStatus.COMPLETED and tools["write"].calls == []
    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "file_guard.py (PreToolUse Write|Edit)"
    assert blocked["error"].startswith(f"{path} {why}")
    assert run.output == f"Outcome: {blocked['error']}", "the model reads the guard's reason"
    assert not ConfirmationRequest.objects.exists(), "a denied call never reaches a person"


def test_reading_documentation_is_allowed_without_asking_anyone(personas) -> None:
    tools = claude_tools()
    agent = agent_with_claude_hooks(
        personas, ("files__Read", {"file_path": str(PROJECT / "docs" / "guide.md")})
    )

    run, status, _ = run_it(personas, agent, tools)

    assert status == RunStatus.COMPLETED
    assert tools["read"].calls == [{"file_path": str(PROJECT / "docs" / "guide.md")}]
    assert not ConfirmationRequest.objects.exists()
    assert run.output == "Outcome: # Guide\nHello."


def test_reading_anything_else_waits_for_a_persons_approval_and_runs_once_approved(personas) -> None:
    set_policy(personas)
    tools = claude_tools()
    source = str(PROJECT / "app" / "settings.py")
    agent = agent_with_claude_hooks(personas, ("files__Read", {"file_path": source}))

    run, status, harness = run_it(personas, agent, tools)

    assert status == RunStatus.AWAITING_APPROVAL and tools["read"].calls == []
    request = ConfirmationRequest.objects.get(run=run)
    assert request.status == ConfirmationStatus.PENDING
    assert request.tool_name == "files__Read" and request.tool_args == {"file_path": source}
    [pending] = events_of(run, ev.APPROVAL_PENDING)
    assert pending["request_id"] == str(request.pk)
    [asked] = [e for e in events_of(run, ev.HOOK_SIDE_EFFECT) if "asked for human approval" in e["message"]]
    assert asked["hook"] == "auto_approve.py (PreToolUse Read|Write|Edit)"
    assert asked["message"].endswith(f"Read on {source} is not a documentation read: a person approves it.")

    confirmation_decide(request_id=request.pk, user=personas.approver, approve=True)
    assert harness.resume(run) == RunStatus.COMPLETED

    assert tools["read"].calls == [{"file_path": source}], "it ran once, after the approval"


def test_a_safe_write_is_not_denied_by_the_guard_but_still_waits_for_a_person(personas) -> None:
    set_policy(personas)
    tools = claude_tools()
    target = str(PROJECT / "notes" / "todo.txt")
    agent = agent_with_claude_hooks(personas, ("files__Write", {"file_path": target, "content": "buy milk"}))

    run, status, harness = run_it(personas, agent, tools)

    assert status == RunStatus.AWAITING_APPROVAL and tools["write"].calls == []
    request = ConfirmationRequest.objects.get(run=run)
    confirmation_decide(request_id=request.pk, user=personas.approver, approve=False, reason="Not today.")
    assert harness.resume(run) == RunStatus.COMPLETED

    run.refresh_from_db()
    assert tools["write"].calls == [], "rejected: it never ran"
    assert "Rejected by" in run.output and "Not today." in run.output


def test_allow_from_a_hook_does_not_skip_the_approval_of_a_tool_that_requires_confirmation(personas) -> None:
    """Claude Code's "allow" skips its permission prompt; here the approval gate still asks for a
    tool flagged requires_confirmation: no hook can take a call out of the gate."""
    set_policy(personas)
    tools = claude_tools(read_requires_confirmation=True)
    agent = agent_with_claude_hooks(personas, ("files__Read", {"file_path": str(PROJECT / "README.md")}))

    run, status, _ = run_it(personas, agent, tools)

    assert status == RunStatus.AWAITING_APPROVAL and tools["read"].calls == []
    assert ConfirmationRequest.objects.get(run=run).status == ConfirmationStatus.PENDING


FAILING_SCRIPTS = {
    "crashes": ("import sys\nraise SystemExit(3)\n", None, "exited with status 3"),
    "raises": ("raise RuntimeError('the hook has a bug')\n", None, "exited with status 1"),
    "times out": ("import time\ntime.sleep(30)\n", 1, "timed out after 1 s"),
}


@pytest.mark.parametrize("failure", list(FAILING_SCRIPTS))
def test_a_hook_script_that_crashes_or_times_out_blocks_the_call_where_claude_code_would_let_it_run(
    personas, tmp_path, failure
) -> None:
    body, timeout, said = FAILING_SCRIPTS[failure]
    script = tmp_path / "flaky.py"
    script.write_text("#!/usr/bin/env python3\n" + body)
    script.chmod(0o755)
    hook: dict[str, Any] = {"type": "command", "command": "$CLAUDE_PROJECT_DIR/flaky.py"}
    if timeout is not None:
        hook["timeout"] = timeout
    settings = tmp_path / "settings.json"
    settings.write_text(
        f'{{"hooks": {{"PreToolUse": [{{"matcher": "Bash", "hooks": [{json.dumps(hook)}]}}]}}}}'
    )
    tools = claude_tools()
    agent = agent_with_claude_hooks(personas, ("shell__Bash", {"command": "ls"}), settings=settings)

    run, status, _ = run_it(personas, agent, tools)

    assert status == RunStatus.COMPLETED
    assert tools["bash"].calls == [], "fail closed: the call did not run"
    [blocked] = events_of(run, ev.TOOL_BLOCKED)
    assert blocked["blocked_by"] == "flaky.py (PreToolUse Bash)"
    assert (
        blocked["error"]
        == "Tool call blocked: the safety check 'flaky.py (PreToolUse Bash)' could not complete."
    )
    [failure] = [e for e in events_of(run, ev.HOOK_SIDE_EFFECT) if e["failure"]]
    assert failure["hook"] == "flaky.py (PreToolUse Bash)" and said in failure["message"], (
        "the trace says why"
    )
