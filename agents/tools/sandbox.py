"""An eval's sandbox: its tool calls are answered without reaching the outside world (docs/design.md §1.2).

A run whose recorded chain carries ``"sandbox"`` (an eval case, and every DAG step and delegate
inside it, which inherit it) gets its tools through :func:`sandboxed_tools`:

* a tool that reaches outside the process (an HTTP action, a database) becomes a
  :class:`DryRunTool`: the model reads the eval set's recorded answer for that tool if it has one,
  else an observation naming the tool and the arguments it would have been called with; nothing
  is sent anywhere, and no hook runs for it (a command or http hook is itself an outside call);
* a tool the eval set calls live (``live_tools``) stays itself only if it only reads
  (:attr:`agents.tools.base.Tool.reads_only`: a GET action, ``<slug>__sql_query``); such a call
  goes through the sandboxed chain — the system guards (read-only mode) and the organisation's
  enforced hooks (``audit_log`` included) — and a call that would need a human's approval is not
  executed: an eval never opens an approval request;
* tools that stay inside the process (the built-in clock and calculator) run as they are.

The sandbox is a plain record, ``{"live_tools": [names], "answers": {name: text}}``
(:func:`sandbox_spec` checks one).
"""

from __future__ import annotations

import json
from typing import Any

from agents.tools.base import Tool, ToolSpec

NOTE = (
    "eval sandbox: the agent's own hooks are bypassed and no tool reaches the outside world "
    "(each call is answered with a dry run or a recorded answer)"
)


def sandbox_note(sandbox: dict[str, Any]) -> str:
    """The trace's note for a sandboxed run: what bypasses what, and which tools were live."""
    live = sandbox.get("live_tools") or []
    answered = sandbox.get("answers") or {}
    parts = [NOTE]
    if live:
        parts.append(
            f"; called live, through the organisation's enforced hooks and read-only mode: {', '.join(live)}"
        )
    if answered:
        parts.append(f"; recorded answers for: {', '.join(answered)}")
    return "".join(parts) + "; no approval is ever asked"


class SandboxSpecError(ValueError):
    """A sandbox record that is not ``{"live_tools": [names], "answers": {name: text}}``."""


def sandbox_spec(*, live_tools: Any = (), answers: Any = None) -> dict[str, Any]:
    """The sandbox record for these settings, or :class:`SandboxSpecError` naming the problem."""
    answers = {} if answers is None else answers
    if not isinstance(live_tools, list | tuple) or not all(isinstance(n, str) and n for n in live_tools):
        raise SandboxSpecError("live tools must be a list of tool names")
    if not isinstance(answers, dict) or not all(isinstance(k, str) and k for k in answers):
        raise SandboxSpecError("recorded answers must map tool names to what the tool answers")
    return {
        "live_tools": sorted(set(live_tools)),
        "answers": {name: _answer_text(value) for name, value in sorted(answers.items())},
    }


def _answer_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


class DryRunTool(Tool):
    """Stands for a tool in an eval: same name, description and parameters for the model; its
    ``run`` sends nothing and answers what would have run (or the recorded answer)."""

    reaches_outside = False

    def __init__(self, tool: Tool, *, answer: str | None = None) -> None:
        self.spec = ToolSpec(
            name=tool.spec.name,
            description=tool.spec.description,
            parameters=tool.spec.parameters,
            requires_confirmation=False,
            is_write=tool.spec.is_write,
            title=tool.spec.title,
        )
        self.needs_approval = bool(tool.spec.requires_confirmation)
        self.answer = answer

    async def run(self, args: dict[str, Any]) -> Any:
        if self.answer is not None:
            return self.answer
        return dry_run_text(self.spec.name, args, needs_approval=self.needs_approval)


def dry_run_text(name: str, args: Any, *, needs_approval: bool = False, asked_by: str = "") -> str:
    """What the model reads for a call an eval does not execute."""
    arguments = json.dumps(args, ensure_ascii=False, sort_keys=True)
    if needs_approval:
        why = f" (asked by {asked_by})" if asked_by else ""
        reason = f"needs a person's approval{why}, which an eval never asks"
    else:
        reason = "was not sent: evals never reach the outside world"
    return (
        f"Dry run (eval): {name} {reason}; it was not executed. It would have been called with {arguments}."
    )


def sandboxed_tools(tools: dict[str, Tool], sandbox: dict[str, Any]) -> dict[str, Tool]:
    """``tools`` as a sandboxed run has them (see the module docstring)."""
    live = set(sandbox.get("live_tools") or ())
    answers = sandbox.get("answers") or {}
    out: dict[str, Tool] = {}
    for name, tool in tools.items():
        if not tool.reaches_outside or (name in live and tool.reads_only and name not in answers):
            out[name] = tool
        else:
            out[name] = DryRunTool(tool, answer=answers.get(name))
    return out


def live_tool_problems(tools: dict[str, Tool], live_tools: Any) -> list[str]:
    """Why some of ``live_tools`` cannot be called live by an eval of an agent with ``tools``:
    each must only read (a name the agent has no tool for is no problem: the set may serve other
    agents)."""
    problems = []
    for name in live_tools or ():
        tool = tools.get(name)
        if tool is not None and tool.reaches_outside and not tool.reads_only:
            problems.append(f"{name} does not only read: an eval can never call it live")
    return problems
