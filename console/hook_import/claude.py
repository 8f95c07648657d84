"""Claude Code settings files: their matchers, commands and events as declarations here."""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
from typing import Any

from console.hook_import.plans import (
    CLAUDE,
    MAX_MATCHER,
    MAX_NAME,
    PROJECT_DIR_VAR,
    ImportPlan,
    PlannedHook,
    Skipped,
    check_shape,
    load_json,
    short,
)
from hooks.kinds.command import CommandHook, check_argv

# --- Claude Code: matchers -------------------------------------------------------------------------

TOOL_PREFIX = "(?:[a-z][a-z0-9_]*__)?"
"""Any connector's prefix, or none: Claude Code's ``Bash`` is our ``shell__Bash`` (or ``Bash``)."""
MCP_PREFIX = "mcp__"


def _alternatives(pattern: str) -> list[str]:
    """The top-level ``|`` alternatives of a regular expression (not those inside a group or a
    character class, nor an escaped ``\\|``)."""
    parts, start, depth, index, in_class = [], 0, 0, 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            if pattern[index + 1 : index + 2] == "^":
                index += 1
            if pattern[index + 1 : index + 2] == "]":  # a leading ] is a literal
                index += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(pattern[start:index])
            start = index + 1
        index += 1
    parts.append(pattern[start:])
    return parts


def claude_matcher(text: Any) -> str:
    """Claude Code's tool matcher as ours, always a ``re:`` one (``""`` for every tool).

    Claude Code matches tool names: ``Bash`` exactly, ``Edit|Write`` either, a regex
    (``Notebook.*``), ``*`` or nothing for all. Ours are ``<connector slug>__<tool>``, so each
    alternative that does not start with ``mcp__`` may have any slug in front:
    ``Edit|Write`` → ``re:(?:[a-z][a-z0-9_]*__)?(?:Edit|Write)``. Alternatives starting with
    ``mcp__`` (Claude Code's spelling of an MCP tool, which our matcher also answers to) are kept
    as they are. Raises ``ValueError`` (why) for a matcher that is not a string, or not a regular
    expression that compiles, or too long to store."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ValueError("the matcher must be a string")
    if text.strip() in ("", "*"):
        return ""
    alternatives = _alternatives(text)
    kept = [alt for alt in alternatives if alt.startswith(MCP_PREFIX)]
    named = [alt for alt in alternatives if not alt.startswith(MCP_PREFIX)]
    pattern = "|".join([*kept, f"{TOOL_PREFIX}(?:{'|'.join(named)})"]) if named else text
    try:
        re.compile(text)  # first as written: an error's position is in the operator's text
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"the matcher {text!r} is not a regular expression that compiles: {exc}") from None
    matcher = f"re:{pattern}"
    if len(matcher) > MAX_MATCHER:
        raise ValueError(
            f"the matcher is too long once translated ({len(matcher)} characters, {MAX_MATCHER} at most)"
        )
    return matcher


# --- Claude Code: commands -------------------------------------------------------------------------

_PLACEHOLDER = "\ue000"  # stands for $CLAUDE_PROJECT_DIR while the command is split
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BRACE_EXPANSION = re.compile(r"\{[^\s{}]*(?:,|\.\.)[^\s{}]*\}")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)


class CommandRefused(ValueError):
    """A command that cannot run as an argv without a shell; the message names why."""


def _scan(command: str) -> tuple[str, list[str], bool]:
    """Read ``command`` as ``sh`` would, without running anything: the command with each
    ``$CLAUDE_PROJECT_DIR`` replaced by a placeholder, the shell constructs it uses (in order, each
    once), and whether it names the project directory."""
    out: list[str] = []
    found: list[str] = []
    uses_project_dir = False
    quote = ""  # "", "'" or '"'
    nested = 0  # parentheses open inside $( … ) or $(( … )): reported once, as the substitution
    index, size = 0, len(command)

    def construct(text: str) -> None:
        if text not in found:
            found.append(text)

    def word_start(at: int) -> bool:
        return at == 0 or command[at - 1] in " \t"

    while index < size:
        char = command[index]
        step = 1
        if quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\":
            if index + 1 >= size:
                construct("a trailing backslash")
            elif quote == "" and command[index + 1] == "\n":
                construct("a line continuation (\\ at the end of a line)")
            step = 2
        elif char == "$":
            rest = command[index + 1 :]
            braced = _BRACED.match(rest)
            named = _NAME.match(rest)
            variable = braced or named
            if variable is not None and variable.group(1 if braced else 0) == PROJECT_DIR_VAR:
                out.append(_PLACEHOLDER)
                uses_project_dir = True
                index += 1 + variable.end()
                continue
            if rest.startswith("(("):
                construct("$((…)) (arithmetic)")
                nested, step = nested + 2, 3
            elif rest.startswith("("):
                construct("$(…) (command substitution)")
                nested, step = nested + 1, 2
            elif rest.startswith("{"):
                name = braced.group(1) if braced is not None else "…"
                construct(f"${{{name}}} (a variable the shell would expand)")
            elif named is not None:
                construct(f"${named.group(0)} (a variable the shell would expand)")
            elif rest[:1] and rest[:1] in "0123456789@*#?$!-":
                construct(f"${rest[0]} (a shell parameter)")
        elif char == "`":
            construct("backticks (`…`, command substitution)")
        elif nested and char in "()":
            nested += 1 if char == "(" else -1
        elif quote == '"':
            quote = "" if char == '"' else quote
        elif char in "'\"":
            quote = char
        elif char in "|&;<>":
            operator = re.match(r"[|&;<>]+", command[index:])
            text = operator.group(0) if operator is not None else char
            step = len(text)
            if "<" in text or ">" in text:
                construct(f"a redirection ({text})")
            else:
                names = {
                    "|": "a pipe (|)",
                    "||": "|| (or)",
                    "&&": "&& (and)",
                    "&": "& (run in the background)",
                }
                construct(names.get(text, f"{text} (a second command)" if text.startswith(";") else text))
        elif char == "\n":
            construct("a newline (a second command)")
        elif char in "()":
            construct("parentheses (a subshell)")
        elif char in "*?[":
            construct(f"a glob ({char})")
        elif char == "{" and _BRACE_EXPANSION.match(command, index):
            construct("braces ({a,b}, expanded by the shell)")
        elif char == "~" and word_start(index):
            construct("~ (the home directory)")
        elif char == "#" and word_start(index):
            construct("# (a comment)")
        out.append(command[index : index + step])
        index += step
    if quote:
        construct(f"an unclosed quote ({quote})")
    return "".join(out), found, uses_project_dir


def claude_command_argv(
    command: Any, *, project_dir: str | None = None, which: Any = shutil.which
) -> tuple[list[str], dict[str, str], list[str]]:
    """``command`` (a Claude Code hook's ``command`` string) as ``(argv, env, notes)`` for a
    ``command`` declaration, split like ``sh`` splits words (:func:`shlex.split`) but never run by
    a shell.

    Refused (:class:`CommandRefused`, naming the construct): pipes, ``&&``, ``||``, ``;``,
    redirections, ``$(…)``, backticks, globs, ``$VAR`` / ``${VAR}`` and the like. The one variable
    taken is ``$CLAUDE_PROJECT_DIR`` (``${CLAUDE_PROJECT_DIR}``), replaced by ``project_dir``
    (refused when none is given). Leading ``NAME=value`` words become the hook's environment. A
    bare program name is looked up with ``which`` (:func:`shutil.which`, on this process's
    ``PATH``) and said so in ``notes``; a relative path, or a program not found or not executable,
    is refused."""
    if not isinstance(command, str) or not command.strip():
        raise CommandRefused("the hook has no command")
    if _PLACEHOLDER in command or "\x00" in command:
        raise CommandRefused("the command holds characters no command line holds")
    text, constructs, uses_project_dir = _scan(command)
    if constructs:
        raise CommandRefused(
            f"needs a shell: {', '.join(constructs)}; hooks here run an argv without a shell — put "
            "this in a script and name the script"
        )
    notes: list[str] = []
    if uses_project_dir:
        if not project_dir:
            raise CommandRefused(
                f"uses ${PROJECT_DIR_VAR}: give the project directory (--project-dir) to put in its place"
            )
        notes.append(f"${PROJECT_DIR_VAR} → {project_dir}")
    try:
        words = shlex.split(text)
    except ValueError as exc:  # the scan finds what shlex refuses; this is a second net
        raise CommandRefused(f"cannot be split into words: {exc}") from None
    argv = [word.replace(_PLACEHOLDER, project_dir or "") for word in words]
    env: dict[str, str] = {}
    while argv and (assignment := _ASSIGNMENT.fullmatch(argv[0])) is not None:
        env[assignment.group(1)] = assignment.group(2)
        argv.pop(0)
    if env:
        notes.append(f"environment {', '.join(sorted(env))} set on the hook")
    if not argv:
        raise CommandRefused("the command names no program")
    program = argv[0]
    if not os.path.isabs(program):
        if "/" in program:
            raise CommandRefused(
                f"{program!r} is a relative path, and hooks here run in a fixed directory, not your "
                f"project's: write it as ${PROJECT_DIR_VAR}/… (with --project-dir) or as an absolute path"
            )
        found = which(program)
        if not found:
            raise CommandRefused(f"the program {program!r} is not on PATH")
        argv[0] = os.path.abspath(found)
        notes.append(f"{program} → {argv[0]} (found on PATH)")
    try:
        check_argv(argv)
    except ValueError as exc:
        raise CommandRefused(str(exc)) from None
    return argv, env, notes


# --- Claude Code: events ---------------------------------------------------------------------------

CLAUDE_EVENTS_HERE = ("PreToolUse", "PostToolUse", "SessionStart")
_NO_POINT = "this platform has no hook point for it"
CLAUDE_EVENTS_SKIPPED: dict[str, str] = {
    "UserPromptSubmit": f"runs on a prompt before the model reads it: {_NO_POINT}",
    "Stop": f"runs when the model has finished its answer: {_NO_POINT}",
    "SubagentStop": f"runs when a subagent has finished: {_NO_POINT}",
    "SubagentStart": f"runs when a subagent starts: {_NO_POINT} (a delegated agent runs its own hooks)",
    "Notification": "Claude Code's notifications to its user: approvals here are notified on their channels",
    "PreCompact": f"runs before Claude Code compacts its context: {_NO_POINT}",
    "SessionEnd": f"runs when a session ends: {_NO_POINT}",
    "PermissionRequest": (
        "Claude Code's permission dialog: here a person approves through the approval gate (a "
        "PreToolUse hook answering permissionDecision 'ask' sends the call there)"
    ),
    "PostToolUseFailure": f"runs after a tool call failed: {_NO_POINT} (PostToolUse sees failed results)",
}
"""Claude Code's other events, and why each is skipped."""
SESSION_SOURCES_HERE = ("startup",)
"""Claude Code's SessionStart sources (``startup``, ``resume``, ``clear``, ``compact``) that a run's
start is: a run starts once; a resumed run does not start again."""


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"its timeout {value!r} is not a positive number of seconds")
    return float(value)


_INTERPRETER = re.compile(r"(?:python|pypy|node|deno|bun|ruby|perl|php|bash|sh|zsh|dash|ksh)[0-9.]*")


def _label(argv: list[str], event: str, matcher: str) -> str:
    """A label for the chain: the script's file name, the event and Claude Code's matcher."""
    script = argv[0]
    if _INTERPRETER.fullmatch(os.path.basename(argv[0])):  # python3 x.py: the script names it
        script = next((arg for arg in argv[1:] if not arg.startswith("-")), script)
    label = f"{os.path.basename(script.rstrip('/')) or script} ({event}{' ' + matcher if matcher else ''})"
    return short(label, MAX_NAME)


def _session_matcher(raw: Any) -> str | None:
    """Why a SessionStart group is skipped, or ``None`` when a run's start is one of its sources."""
    if raw is None or (isinstance(raw, str) and raw.strip() in ("", "*")):
        return None
    if not isinstance(raw, str):
        return "its matcher must be a string"
    sources = [s.strip() for s in raw.split("|")]
    if any(source in SESSION_SOURCES_HERE for source in sources):
        return None
    return (
        f"matches the session sources {raw!r}: a run here starts once (startup) and a resumed run "
        "does not start again"
    )


def claude_settings_plan(
    text: str, *, project_dir: str | None = None, which: Any = shutil.which
) -> ImportPlan:
    """The declarations the ``hooks`` block of a Claude Code settings file becomes, and what is
    skipped, with why (:mod:`module docs <console.hook_import>`). Identical commands for the same
    event and matcher are imported once (Claude Code runs them once). Raises
    :class:`HookImportError` for a file that is not JSON, or whose ``hooks`` block is missing or of
    the wrong shape."""
    doc = load_json(text)
    check_shape(
        isinstance(doc, dict), "(top)", "a Claude Code settings file is a JSON object with a 'hooks' block"
    )
    check_shape("hooks" in doc, "(top)", "there is no 'hooks' block")
    block = doc["hooks"]
    check_shape(isinstance(block, dict), "hooks", "must be an object of event names to lists of matchers")
    if project_dir:
        project_dir = os.path.abspath(project_dir)
    plan = ImportPlan(source=CLAUDE)
    others = sorted(key for key in doc if key != "hooks")
    if others:
        plan.notes.append(f"the file's other settings ({', '.join(others)}) are not hooks: not imported")
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    for event, groups in block.items():
        where = f"hooks.{event}"
        check_shape(isinstance(groups, list), where, "must be a list of {matcher, hooks} objects")
        for g, group in enumerate(groups):
            gwhere = f"{where}[{g}]"
            check_shape(isinstance(group, dict), gwhere, "must be an object with 'matcher' and 'hooks'")
            check_shape(
                isinstance(group.get("hooks"), list),
                f"{gwhere}.hooks",
                "must be a list of hooks ({type, command, timeout})",
            )
            for h, hook in enumerate(group["hooks"]):
                check_shape(
                    isinstance(hook, dict),
                    f"{gwhere}.hooks[{h}]",
                    "must be an object ({type, command, timeout})",
                )
            _plan_group(plan, seen, event, group, gwhere, project_dir=project_dir, which=which)
    return plan


def _plan_group(
    plan: ImportPlan,
    seen: set[tuple[str, str, tuple[str, ...]]],
    event: str,
    group: dict[str, Any],
    gwhere: str,
    *,
    project_dir: str | None,
    which: Any,
) -> None:
    raw_matcher = group.get("matcher")
    shown_matcher = (
        raw_matcher if isinstance(raw_matcher, str) and raw_matcher.strip() not in ("", "*") else ""
    )
    for h, hook in enumerate(group["hooks"]):
        where = f"{gwhere}.hooks[{h}]"
        kind = hook.get("type")
        command = hook.get("command")
        what = short(command) if isinstance(command, str) else str(kind or "")
        if event not in CLAUDE_EVENTS_HERE:
            why = CLAUDE_EVENTS_SKIPPED.get(event, "not an event this platform has")
            plan.skipped.append(Skipped(where, what, f"{event}: {why}"))
            continue
        if kind != "command":
            why = (
                "a prompt hook asks a model to decide; hooks here are code outside the model"
                if kind in ("prompt", "agent")
                else "only command hooks can be imported"
            )
            plan.skipped.append(Skipped(where, what, f"type {kind!r}: {why}"))
            continue
        if hook.get("async") is True:
            plan.skipped.append(
                Skipped(where, what, "an async hook runs in the background and cannot stop a call; "
                        "every hook here is waited for: remove 'async' to import it")
            )  # fmt: skip
            continue
        try:
            if event == "SessionStart":
                why_not = _session_matcher(raw_matcher)
                if why_not is not None:
                    raise ValueError(why_not)
                matcher = ""
            else:
                matcher = claude_matcher(raw_matcher)
            timeout = _timeout(hook.get("timeout"))
            argv, env, notes = claude_command_argv(command, project_dir=project_dir, which=which)
        except ValueError as exc:  # CommandRefused included
            plan.skipped.append(Skipped(where, what, str(exc)))
            continue
        key = (event, matcher, tuple(argv))
        if key in seen:
            plan.skipped.append(
                Skipped(where, what, "the same command for the same event and matcher is imported once")
            )
            continue
        seen.add(key)
        if timeout is None:
            notes.append(
                f"no timeout given: {CommandHook.timeout:g} s, this platform's default for command "
                "hooks (Claude Code's is 60 s)"
            )
        if project_dir:  # Claude Code gives its hooks the variable too; scripts read it
            env = {PROJECT_DIR_VAR: project_dir, **env}
            named = f"${PROJECT_DIR_VAR} → {project_dir}"
            notes = [note for note in notes if note != named]
            notes.insert(0, f"{named} (in its environment too)")
        params: dict[str, Any] = {"argv": argv}
        if env:
            params["env"] = env
        label_matcher = shown_matcher if event != "SessionStart" else ""
        plan.hooks.append(
            PlannedHook(
                where=where,
                name=_label(argv, event, label_matcher),
                kind="command",
                point=event,
                matcher=matcher,
                params=params,
                timeout=timeout,
                notes=notes,
            )
        )
