"""Bringing Claude Code hooks: how a settings file's matchers, commands, events, types and
timeouts translate, what is refused or skipped and why, and files that cannot be read at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.hook_import import (
    CommandRefused,
    HookImportError,
    claude_command_argv,
    claude_matcher,
    claude_settings_plan,
)
from hooks.kinds.base import Matcher
from hooks.kinds.command import CommandHook

HOOKS_DIR = Path(__file__).resolve().parent.parent / "claude_hooks"
VALIDATOR = HOOKS_DIR / "bash_validator.py"


def settings(event: str = "PreToolUse", *, matcher: Any = "Bash", **hook: Any) -> str:
    hook.setdefault("type", "command")
    hook.setdefault("command", "$CLAUDE_PROJECT_DIR/bash_validator.py")
    group: dict[str, Any] = {"hooks": [hook]}
    if matcher is not None:
        group["matcher"] = matcher
    return json.dumps({"hooks": {event: [group]}})


def plan_of(text: str, project_dir: Path | None = HOOKS_DIR):
    return claude_settings_plan(text, project_dir=str(project_dir) if project_dir else None)


def matches(claude: str, tool: str) -> bool:
    return Matcher(claude_matcher(claude))(tool)


# --- matchers --------------------------------------------------------------------------------------


def test_a_plain_tool_name_matches_that_tool_alone_or_behind_any_connector() -> None:
    assert claude_matcher("Bash") == "re:(?:[a-z][a-z0-9_]*__)?(?:Bash)"
    for tool in ("Bash", "shell__Bash", "dev_box__Bash"):
        assert matches("Bash", tool), tool
    for tool in ("Bashful", "shell__Bash2", "shell__bash", "sh__ell__Bash__x", "Shell__Bash"):
        assert not matches("Bash", tool), tool


def test_alternatives_become_one_group_and_each_matches_behind_any_connector() -> None:
    assert claude_matcher("Edit|Write") == "re:(?:[a-z][a-z0-9_]*__)?(?:Edit|Write)"
    assert matches("Edit|Write", "files__Edit") and matches("Edit|Write", "Write")
    assert not matches("Edit|Write", "files__Read") and not matches("Edit|Write", "files__EditX")


def test_a_regex_keeps_its_meaning_behind_any_connector() -> None:
    assert matches("Notebook.*", "jupyter__NotebookEdit") and matches("Notebook.*", "NotebookRead")
    assert not matches("Notebook.*", "jupyter__Edit")


def test_names_and_regexes_in_claude_codes_mcp_spelling_are_kept_as_they_are() -> None:
    assert claude_matcher("mcp__memory__.*") == "re:mcp__memory__.*"
    assert claude_matcher("mcp__github__create_issue") == "re:mcp__github__create_issue"
    assert matches("mcp__memory__.*", "mcp__memory__create_entities")


def test_mcp_alternatives_stay_as_they_are_beside_names_that_get_the_connector_prefix() -> None:
    assert claude_matcher("mcp__memory__.*|Bash") == "re:mcp__memory__.*|(?:[a-z][a-z0-9_]*__)?(?:Bash)"
    assert matches("mcp__memory__.*|Bash", "shell__Bash")
    # a | inside a group or a character class is not an alternative of the whole
    assert claude_matcher("mcp__(a|b)__x") == "re:mcp__(a|b)__x"


@pytest.mark.parametrize("every", ["*", "", "  ", None])
def test_a_star_or_an_empty_matcher_matches_every_tool(every) -> None:
    assert claude_matcher(every) == ""


@pytest.mark.parametrize("broken", ["(", "Bash[", "*Bash"])
def test_a_matcher_that_does_not_compile_is_skipped_saying_why(broken) -> None:
    plan = plan_of(settings(matcher=broken))

    assert plan.hooks == []
    [skipped] = plan.skipped
    assert skipped.where == "hooks.PreToolUse[0].hooks[0]"
    assert f"the matcher {broken!r} is not a regular expression that compiles" in skipped.why


def test_every_matcher_produced_compiles() -> None:
    for text in ("Bash", "Edit|Write|MultiEdit", "Notebook.*", "mcp__x__.*|Read", "Web(Fetch|Search)"):
        assert claude_matcher(text).startswith("re:")
        Matcher(claude_matcher(text))  # raises if it does not compile


# --- commands ------------------------------------------------------------------------------------


def which_nothing(name: str) -> None:
    return None


def test_a_command_is_split_into_words_as_a_shell_would_without_running_one() -> None:
    argv, env, notes = claude_command_argv(
        f"""{VALIDATOR} --reason 'audit: "Q4"' "two words" back\\ slash""", project_dir=None
    )

    assert argv == [str(VALIDATOR), "--reason", 'audit: "Q4"', "two words", "back slash"]
    assert env == {} and notes == []


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("/bin/cat x | /usr/bin/jq .", "a pipe (|)"),
        ("/bin/true && /bin/echo ok", "&& (and)"),
        ("/bin/false || /bin/echo no", "|| (or)"),
        ("/bin/echo a; /bin/echo b", "; (a second command)"),
        ("/bin/echo a > /tmp/out", "a redirection (>)"),
        ("/bin/echo a >> /tmp/out", "a redirection (>>)"),
        ("/usr/bin/wc -l < /etc/hosts", "a redirection (<)"),
        ("/bin/echo a 2>&1", "a redirection (>&)"),
        ("/bin/sleep 5 &", "& (run in the background)"),
        ("/bin/echo $(id -u)", "$(…) (command substitution)"),
        ('/bin/echo "$(id -u)"', "$(…) (command substitution)"),
        ("/bin/echo `id -u`", "backticks (`…`, command substitution)"),
        ("/bin/echo $((1 + 2))", "$((…)) (arithmetic)"),
        ("/bin/ls *.py", "a glob (*)"),
        ("/bin/ls file?.txt", "a glob (?)"),
        ("/bin/ls [ab].txt", "a glob ([)"),
        ("/bin/echo $HOME", "$HOME (a variable the shell would expand)"),
        ('/bin/echo "${USER}"', "${USER} (a variable the shell would expand)"),
        ("/bin/echo ${X:-default}", "${…} (a variable the shell would expand)"),
        ("/bin/echo $1", "$1 (a shell parameter)"),
        ("/bin/echo {a,b}", "braces ({a,b}, expanded by the shell)"),
        ("~/hooks/check.sh", "~ (the home directory)"),
        ("/bin/echo hi # note", "# (a comment)"),
        ("(cd /tmp)", "parentheses (a subshell)"),
        ("/bin/echo 'unclosed", "an unclosed quote (')"),
        ("/bin/echo a\n/bin/echo b", "a newline (a second command)"),
    ],
)
def test_a_command_that_needs_a_shell_is_refused_naming_the_construct(command, named) -> None:
    with pytest.raises(CommandRefused) as refused:
        claude_command_argv(command, project_dir="/srv/project")

    assert str(refused.value).startswith("needs a shell: ")
    assert named in str(refused.value)


def test_quoted_shell_characters_are_plain_text_and_single_quotes_keep_dollars() -> None:
    argv, _, _ = claude_command_argv(f"{VALIDATOR} 'a | b && c; d > e $HOME *' \"x|y;z\"")

    assert argv[1:] == ["a | b && c; d > e $HOME *", "x|y;z"]


@pytest.mark.parametrize(
    "spelling",
    [
        "$CLAUDE_PROJECT_DIR/bash_validator.py",
        "${CLAUDE_PROJECT_DIR}/bash_validator.py",
        '"$CLAUDE_PROJECT_DIR"/bash_validator.py',
        '"$CLAUDE_PROJECT_DIR/bash_validator.py"',
    ],
)
def test_the_project_directory_variable_is_replaced_by_the_directory_given(spelling) -> None:
    argv, _, notes = claude_command_argv(f"{spelling} --root $CLAUDE_PROJECT_DIR", project_dir=str(HOOKS_DIR))

    assert argv == [str(VALIDATOR), "--root", str(HOOKS_DIR)]
    assert f"$CLAUDE_PROJECT_DIR → {HOOKS_DIR}" in notes


def test_the_project_directory_variable_without_a_project_directory_is_refused_naming_it() -> None:
    plan = plan_of(settings(), project_dir=None)

    [skipped] = plan.skipped
    assert "uses $CLAUDE_PROJECT_DIR: give the project directory (--project-dir)" in skipped.why


def test_a_bare_program_name_is_looked_up_on_path_and_the_report_says_so() -> None:
    argv, _, notes = claude_command_argv(
        "python3 $CLAUDE_PROJECT_DIR/bash_validator.py",
        project_dir=str(HOOKS_DIR),
        which=lambda name: "/usr/bin/python3" if name == "python3" else None,
    )

    assert argv == ["/usr/bin/python3", str(VALIDATOR)]
    assert "python3 → /usr/bin/python3 (found on PATH)" in notes


def test_a_program_that_is_not_on_path_is_refused() -> None:
    with pytest.raises(CommandRefused, match="the program 'hookctl' is not on PATH"):
        claude_command_argv("hookctl check", which=which_nothing)


def test_a_relative_path_is_refused_pointing_at_the_project_directory_variable() -> None:
    with pytest.raises(CommandRefused, match=r"relative path.*\$CLAUDE_PROJECT_DIR/…"):
        claude_command_argv(".claude/hooks/check.sh")


def test_a_script_that_is_not_executable_is_refused(tmp_path) -> None:
    script = tmp_path / "check.sh"
    script.write_text("#!/bin/sh\n")

    with pytest.raises(CommandRefused, match="is not an executable file"):
        claude_command_argv(str(script))


def test_leading_assignments_become_the_hooks_environment() -> None:
    argv, env, notes = claude_command_argv(f"STRICT=1 LEVEL='high risk' {VALIDATOR}")

    assert argv == [str(VALIDATOR)] and env == {"STRICT": "1", "LEVEL": "high risk"}
    assert "environment LEVEL, STRICT set on the hook" in notes


# --- events, types and timeouts --------------------------------------------------------------------


def test_the_three_events_this_platform_has_become_command_declarations_with_their_timeouts() -> None:
    text = json.dumps(
        {
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [
                    {"type": "command", "command": "$CLAUDE_PROJECT_DIR/bash_validator.py", "timeout": 30}]}],
                "PostToolUse": [{"matcher": "Write|Edit", "hooks": [
                    {"type": "command", "command": "$CLAUDE_PROJECT_DIR/file_guard.py", "timeout": 2.5}]}],
                "SessionStart": [{"matcher": "startup", "hooks": [
                    {"type": "command", "command": "$CLAUDE_PROJECT_DIR/auto_approve.py"}]}],
            }
        }
    )  # fmt: skip

    plan = plan_of(text)

    assert plan.skipped == []
    assert [(h.kind, h.point, h.matcher, h.timeout) for h in plan.hooks] == [
        ("command", "PreToolUse", "re:(?:[a-z][a-z0-9_]*__)?(?:Bash)", 30.0),
        ("command", "PostToolUse", "re:(?:[a-z][a-z0-9_]*__)?(?:Write|Edit)", 2.5),
        ("command", "SessionStart", "", None),
    ]
    assert [h.name for h in plan.hooks] == [
        "bash_validator.py (PreToolUse Bash)",
        "file_guard.py (PostToolUse Write|Edit)",
        "auto_approve.py (SessionStart)",
    ]
    assert plan.hooks[0].params == {"argv": [str(VALIDATOR)], "env": {"CLAUDE_PROJECT_DIR": str(HOOKS_DIR)}}
    assert any(
        f"no timeout given: {CommandHook.timeout:g} s" in note and "Claude Code's is 60 s" in note
        for note in plan.hooks[2].notes
    )


@pytest.mark.parametrize(
    ("event", "why"),
    [
        ("UserPromptSubmit", "runs on a prompt before the model reads it"),
        ("Stop", "runs when the model has finished its answer"),
        ("SubagentStop", "runs when a subagent has finished"),
        ("Notification", "Claude Code's notifications"),
        ("PreCompact", "runs before Claude Code compacts its context"),
        ("SessionEnd", "runs when a session ends"),
        ("PermissionRequest", "Claude Code's permission dialog"),
        ("SomethingNew", "not an event this platform has"),
    ],
)
def test_every_other_event_is_listed_as_skipped_with_why(event, why) -> None:
    plan = plan_of(settings(event, matcher=None))

    assert plan.hooks == []
    [skipped] = plan.skipped
    assert skipped.where == f"hooks.{event}[0].hooks[0]"
    assert skipped.why.startswith(f"{event}: ") and why in skipped.why
    assert skipped.what == "$CLAUDE_PROJECT_DIR/bash_validator.py"


@pytest.mark.parametrize(
    ("hook", "why"),
    [
        ({"type": "prompt", "prompt": "Is it safe?"}, "type 'prompt': a prompt hook asks a model to decide"),
        ({"type": "agent", "prompt": "Check it"}, "type 'agent': a prompt hook asks a model to decide"),
        ({"type": "webhook"}, "type 'webhook': only command hooks can be imported"),
        ({"type": "command", "async": True}, "an async hook runs in the background"),
    ],
)
def test_hooks_that_are_not_plain_commands_are_skipped_with_why(hook, why) -> None:
    group = {"matcher": "Bash", "hooks": [{"command": "$CLAUDE_PROJECT_DIR/bash_validator.py", **hook}]}

    plan = plan_of(json.dumps({"hooks": {"PreToolUse": [group]}}))

    assert plan.hooks == [] and why in plan.skipped[0].why


@pytest.mark.parametrize("timeout", [0, -1, "30", True, None])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(timeout) -> None:
    plan = plan_of(settings(timeout=timeout))

    if timeout is None:  # no timeout: the kind's default, said in the report
        assert plan.hooks[0].timeout is None
        return
    assert plan.hooks == []
    assert f"its timeout {timeout!r} is not a positive number of seconds" in plan.skipped[0].why


@pytest.mark.parametrize(
    ("matcher", "imported"),
    [("startup", True), ("startup|resume", True), ("*", True), ("resume", False), ("compact", False)],
)
def test_a_session_start_hook_is_imported_when_a_runs_start_is_one_of_its_sources(matcher, imported) -> None:
    plan = plan_of(settings("SessionStart", matcher=matcher))

    assert bool(plan.hooks) is imported
    if not imported:
        assert "a run here starts once (startup)" in plan.skipped[0].why


def test_the_same_command_for_the_same_event_and_matcher_is_imported_once() -> None:
    hook = {"type": "command", "command": "$CLAUDE_PROJECT_DIR/bash_validator.py"}
    groups = [{"matcher": "Bash", "hooks": [hook, hook]}, {"matcher": "Bash", "hooks": [hook]}]

    plan = plan_of(json.dumps({"hooks": {"PreToolUse": groups}}))

    assert len(plan.hooks) == 1
    assert [s.where for s in plan.skipped] == ["hooks.PreToolUse[0].hooks[1]", "hooks.PreToolUse[1].hooks[0]"]


def test_a_refused_command_is_skipped_and_the_rest_of_the_file_still_imports() -> None:
    groups = [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "jq -r .tool_input.command | grep rm"}]},
        {
            "matcher": "Bash",
            "hooks": [{"type": "command", "command": "$CLAUDE_PROJECT_DIR/bash_validator.py"}],
        },
    ]

    plan = plan_of(json.dumps({"hooks": {"PreToolUse": groups}, "permissions": {"allow": []}}))

    assert [h.name for h in plan.hooks] == ["bash_validator.py (PreToolUse Bash)"]
    [skipped] = plan.skipped
    assert skipped.what == "jq -r .tool_input.command | grep rm" and "a pipe (|)" in skipped.why
    assert plan.notes == ["the file's other settings (permissions) are not hooks: not imported"]
    report = "\n".join(plan.report(saved=False))
    assert "would import (dry run: nothing saved) 1 hook declaration(s)" in report
    assert "- hooks.PreToolUse[0].hooks[0] (jq -r .tool_input.command | grep rm): needs a shell" in report


# --- files that cannot be imported ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("{not json", "not JSON: "),
        ("[1, 2]", "(top): a Claude Code settings file is a JSON object with a 'hooks' block"),
        ('{"permissions": {}}', "(top): there is no 'hooks' block"),
        ('{"hooks": ["PreToolUse"]}', "hooks: must be an object of event names to lists of matchers"),
        (
            '{"hooks": {"PreToolUse": {"matcher": "Bash"}}}',
            "hooks.PreToolUse: must be a list of {matcher, hooks}",
        ),
        (
            '{"hooks": {"PreToolUse": ["Bash"]}}',
            "hooks.PreToolUse[0]: must be an object with 'matcher' and 'hooks'",
        ),
        (
            '{"hooks": {"PreToolUse": [{"matcher": "Bash"}]}}',
            "hooks.PreToolUse[0].hooks: must be a list of hooks",
        ),
        ('{"hooks": {"Stop": [{"hooks": ["x"]}]}}', "hooks.Stop[0].hooks[0]: must be an object"),
    ],
)
def test_a_file_that_is_not_json_or_has_a_hooks_block_of_the_wrong_shape_is_a_clear_error(
    text, message
) -> None:
    with pytest.raises(HookImportError) as caught:
        claude_settings_plan(text)

    assert message in str(caught.value)
