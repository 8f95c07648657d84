"""Command hooks driven by real Claude Code style hook scripts (tests/hooks/scripts/)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from hooks import HookContext, HookRegistry
from hooks.catalog import HookDeclarationError, build_item

SCRIPTS = Path(__file__).resolve().parent / "scripts"
PAY = {"purchase_id": "PO-1001", "amount": 1250.5}


def command(script: str, *args: str, point: str = "PreToolUse", **fields: Any):
    return build_item(
        {
            "kind": "command",
            "name": script.split(".")[0],
            "point": point,
            "params": {"argv": [str(SCRIPTS / script), *args]},
            **fields,
        }
    )


def pre_context(args: dict[str, Any] | None = None, *, tool: str = "oa__purchase_pay") -> HookContext:
    return HookContext(
        tool_name=tool,
        tool_args=dict(PAY if args is None else args),
        agent_id=7,
        user_id=3,
        metadata={"org_id": 1, "run_id": 42, "tool_call_id": "call_1", "requires_confirmation": False},
    )


async def pre(hook, args: dict[str, Any] | None = None, **kwargs: Any):
    return await HookRegistry([hook]).run_pre_tool_use(pre_context(args, **kwargs))


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper is dead)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


async def test_exit_2_blocks_the_call_with_stderr_as_the_reason() -> None:
    out = await pre(command("block_payments.sh"))

    assert not out.allow
    assert out.error == "Payments are frozen until the audit ends."
    assert out.blocked_by == "block_payments"


async def test_a_json_deny_blocks_with_its_reason_and_other_calls_pass(jq: str) -> None:
    hook = command("deny_large_amounts.sh")

    denied = await pre(hook, {"purchase_id": "PO-9", "amount": 60000})
    allowed = await pre(hook, {"purchase_id": "PO-9", "amount": 40000})

    assert not denied.allow and denied.error == "Payments of 60000 need the CFO."
    assert allowed.allow and allowed.tool_args == {"purchase_id": "PO-9", "amount": 40000}


async def test_updated_input_rewrites_the_arguments_the_tool_receives() -> None:
    out = await pre(command("add_currency.py"))

    assert out.allow and out.tool_args == {**PAY, "currency": "CNY"}


async def test_ask_marks_the_call_for_the_approval_gate(jq: str) -> None:
    ctx = pre_context({"purchase_id": "PO-9", "amount": 60000})

    out = await HookRegistry([command("ask_large_amounts.sh")]).run_pre_tool_use(ctx)

    assert out.allow and out.requires_confirmation and out.confirmation_requested_by == ["ask_large_amounts"]
    assert [e.message for e in out.side_effects] == ["asked for human approval: large payment"]
    small = await HookRegistry([command("ask_large_amounts.sh")]).run_pre_tool_use(
        pre_context({"purchase_id": "PO-9", "amount": 40000})
    )
    assert small.allow and not small.requires_confirmation


async def test_updated_mcp_tool_output_rewrites_the_result_and_additional_context_is_appended() -> None:
    hook = command("redact_result.py", point="PostToolUse")
    ctx = pre_context()
    ctx.tool_result = {"card": "4111111111111111", "status": "paid"}

    out = await HookRegistry([hook]).run_post_tool_use(ctx)

    assert out.failed_hooks == []
    assert out.result == '{"card": "************1111", "status": "paid"}\n\nCard numbers were masked.'


async def test_a_post_tool_use_block_decision_withholds_the_result_with_its_reason() -> None:
    hook = command("withhold_cards.py", point="PostToolUse")
    card, clean = pre_context(), pre_context()
    card.tool_result = {"card": "4111111111111111", "status": "paid"}
    clean.tool_result = {"status": "paid"}

    withheld = await HookRegistry([hook]).run_post_tool_use(card)
    passed = await HookRegistry([hook]).run_post_tool_use(clean)

    assert withheld.failed_hooks == [] and "4111" not in json.dumps(withheld.result)
    assert withheld.result == "[The tool's result was withheld by 'withhold_cards': It shows a card number.]"
    assert [e.message for e in withheld.side_effects] == ["result withheld: It shows a card number."]
    assert passed.result == {"status": "paid"} and passed.side_effects == []


async def test_a_session_start_script_adds_context(jq: str) -> None:
    out = await HookRegistry([command("session_context.sh", point="SessionStart")]).run_session_start(
        HookContext(metadata={"run_id": 42})
    )

    assert out.ok and out.additional_context == ["Today is a payment freeze day."]


async def test_a_hung_script_is_killed_at_its_timeout_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    hook = command("hang.sh", str(pids), timeout=0.5)

    began = time.monotonic()
    out = await pre(hook)
    elapsed = time.monotonic() - began

    assert not out.allow and out.blocked_by == "hang"
    assert "timed out after 0.5 s" in out.side_effects[0].message
    assert elapsed < 3
    script, child = (int(line) for line in pids.read_text().split())
    await asyncio.sleep(0.1)
    assert not alive(script) and not alive(child), "no process is left behind"


async def test_a_background_child_left_by_a_script_that_answered_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    began = time.monotonic()
    out = await pre(command("leave_child.sh", str(pid_file), timeout=5))

    assert out.allow and time.monotonic() - began < 3, "the held-open pipe does not stall the call"
    await asyncio.sleep(0.1)
    assert not alive(int(pid_file.read_text()))


async def test_garbage_on_stdout_fails_closed() -> None:
    out = await pre(command("garbage.sh"))

    assert not out.allow and out.blocked_by == "garbage"
    assert out.error == "Tool call blocked: the safety check 'garbage' could not complete."


async def test_a_crash_fails_closed_without_repeating_its_stderr() -> None:
    out = await pre(command("crash.sh"))

    assert not out.allow
    assert "exited with status 1" in out.side_effects[0].message
    assert "hunter2" not in json.dumps([e.message for e in out.side_effects]) + (out.error or "")


async def test_a_crash_is_let_through_only_when_the_declaration_says_on_error_allow() -> None:
    out = await pre(command("crash.sh", on_error="allow"))

    assert out.allow and out.side_effects[0].failure


async def test_a_post_tool_use_crash_withholds_the_result() -> None:
    ctx = pre_context()
    ctx.tool_result = {"card": "4111111111111111"}

    out = await HookRegistry([command("crash.sh", point="PostToolUse")]).run_post_tool_use(ctx)

    assert "4111" not in json.dumps(out.result) and out.failed_hooks == ["crash"]


async def test_output_past_the_cap_fails_closed(settings) -> None:
    settings.HOOK_COMMAND_MAX_OUTPUT = 100_000

    out = await pre(command("flood.sh"))

    assert not out.allow and "wrote more than 100000 bytes" in out.side_effects[0].message


async def test_it_passes_claude_code_fields_argv_verbatim_a_minimal_env_and_a_fixed_directory(
    tmp_path: Path, monkeypatch, settings
) -> None:
    monkeypatch.setenv("FIMONE_CANARY_SECRET", "leaked")
    settings.HOOK_COMMAND_CWD = str(tmp_path)
    hostile = "$(touch pwned); `id`"

    out = await pre(command("record.sh", str(tmp_path), hostile))

    assert out.allow
    event = json.loads((tmp_path / "stdin.json").read_text())
    assert event["hook_event_name"] == "PreToolUse" and event["session_id"] == "42"
    assert event["tool_name"] == "oa__purchase_pay" and event["tool_input"] == PAY
    assert event["tool_use_id"] == "call_1"
    assert event["fimone"] == {
        "hook": "record",
        "agent_id": 7,
        "user_id": 3,
        "org_id": 1,
        "run_id": 42,
        "requires_confirmation": False,
    }
    assert (tmp_path / "argv.txt").read_text().splitlines() == [str(tmp_path), hostile]
    assert not (tmp_path / "pwned").exists()
    env = dict(line.split("=", 1) for line in (tmp_path / "env.txt").read_text().splitlines() if "=" in line)
    assert "FIMONE_CANARY_SECRET" not in env and "SECRET_KEY" not in env and "DATABASE_URL" not in env
    assert (tmp_path / "cwd.txt").read_text().strip() == str(tmp_path)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"argv": "rm -rf /"}, "argv must be a non-empty list"),
        ({"argv": []}, "argv must be a non-empty list"),
        ({"argv": ["relative.sh"]}, "argv[0] must be an absolute path"),
        ({"argv": ["/nonexistent/hook.sh"]}, "is not an executable file"),
        ({"argv": [str(SCRIPTS)]}, "is not an executable file"),
        ({"argv": ["/bin/true"], "shell": True}, "unknown params ['shell']"),
        ({"argv": ["/bin/true"], "env": {"A": 1}}, "env must be an object of string values"),
    ],
)
def test_it_refuses_a_command_declaration_that_is_not_an_argv_list(params, message) -> None:
    with pytest.raises(HookDeclarationError, match=None) as caught:
        build_item({"kind": "command", "name": "c", "point": "PreToolUse", "params": params})
    assert message in str(caught.value)


def test_it_refuses_a_command_declared_at_the_gate() -> None:
    with pytest.raises(HookDeclarationError, match="not below the approval gate"):
        build_item(
            {
                "kind": "command",
                "name": "late",
                "point": "PreToolUse",
                "priority": 1_000_000,
                "params": {"argv": ["/bin/true"]},
            }
        )


async def test_a_matcher_limits_the_tools_a_command_runs_for() -> None:
    glob = command("block_payments.sh", matcher="oa__purchase_*")
    regex = command("block_payments.sh", matcher="re:ledger__sql_(execute|write)")

    assert not (await pre(glob)).allow
    assert (await pre(glob, tool="oa__vendor_list")).allow
    assert not (await pre(regex, tool="ledger__sql_execute")).allow
    assert (await pre(regex, tool="ledger__sql_execute_more")).allow, "a regex matches the whole name"


def test_no_script_is_left_running_by_this_module() -> None:
    mine = os.getpid()
    children = Path(f"/proc/{mine}/task/{mine}/children")
    if children.exists():
        assert all(not alive(int(pid)) for pid in children.read_text().split())
