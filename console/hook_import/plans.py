"""What an import turns a file into: the declarations planned and what was skipped, with why."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from agents.models import Agent, HookDeclaration
from fimone.parsers import loads as json_loads
from fimone.storable import unstorable

CLAUDE = "claude"
FIM_ONE = "fimone"
SOURCES = {CLAUDE: "Claude Code settings", FIM_ONE: "FIM One agent configuration"}
MAX_NAME = 100
MAX_MATCHER = 200


class HookImportError(ValueError):
    """A file that cannot be imported at all. The message says where and why, in words."""


@dataclass(frozen=True)
class Skipped:
    """An item of the file left out: ``where`` in the file, ``what`` it is, ``why``."""

    where: str
    what: str
    why: str

    def __str__(self) -> str:
        return f"{self.where} ({self.what}): {self.why}" if self.what else f"{self.where}: {self.why}"


@dataclass
class PlannedHook:
    """A declaration the file becomes, not saved: what :meth:`declaration` builds for an agent.
    ``notes`` say what was translated (a program looked up, the project directory put in)."""

    where: str
    name: str
    kind: str
    point: str = ""
    matcher: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    priority: int | None = None
    notes: list[str] = field(default_factory=list)

    def declaration(self, agent: Agent) -> HookDeclaration:
        return HookDeclaration(
            organization_id=agent.organization_id,
            agent=agent,
            name=self.name,
            kind=self.kind,
            point=self.point,
            matcher=self.matcher,
            params=self.params,
            timeout=self.timeout,
            priority=self.priority,
        )

    def describe(self) -> str:
        """One line: the label, then what runs and when."""
        parts = [self.point or "its own event"] if self.kind != "class" else []
        if self.kind == "command":
            parts.append(f"for {self.matcher or 'every tool'}")
            parts.append("argv " + shlex.join(self.params["argv"]))
            env = {k: v for k, v in (self.params.get("env") or {}).items() if k != PROJECT_DIR_VAR}
            if env:  # the project directory is in the notes
                parts.append("env " + " ".join(f"{k}={v}" for k, v in env.items()))
        elif self.params:
            parts.append(", ".join(f"{k}={v!r}" for k, v in self.params.items()))
        if self.timeout is not None:
            parts.append(f"timeout {self.timeout:g} s")
        if self.priority is not None:
            parts.append(f"priority {self.priority}")
        return f"{self.name}: {'; '.join(parts)}" if parts else self.name


@dataclass
class ImportPlan:
    """What a file becomes: ``hooks`` to declare, in order, and ``skipped`` items with why;
    ``notes`` about the file as a whole; ``require_confirmation_for_all``: turn the agent's flag on
    (a FIM One agent that asks a person before every call; an import never turns it off)."""

    source: str
    hooks: list[PlannedHook] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    require_confirmation_for_all: bool = False

    def report(self, *, saved: bool) -> list[str]:
        """The plan in lines a person reads: what is (or would be) imported, then what was left
        out and why."""
        verb = "imported" if saved else "would import (dry run: nothing saved)"
        lines = [f"{SOURCES[self.source]}: {verb} {len(self.hooks)} hook declaration(s)"]
        for hook in self.hooks:
            lines.append(f"  + {hook.describe()}")
            lines += [f"      {note}" for note in hook.notes]
        if self.require_confirmation_for_all:
            lines.append(
                "  + require_confirmation_for_all: on (every tool call waits for a person's approval)"
            )
        lines += [f"  note: {note}" for note in self.notes]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)}:")
            lines += [f"  - {item}" for item in self.skipped]
        return lines


def load_json(text: str) -> Any:
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise HookImportError("the file is empty")
    try:
        doc = json_loads(text)
    except ValueError as exc:
        raise HookImportError(f"not JSON: {exc}") from None
    # What the file holds becomes declarations' rows: a value no database stores (NaN,
    # ±Infinity, NUL) is named here rather than failing the save (docs/design.md §1.16).
    unfit = unstorable(doc, name="the file")
    if unfit is not None:
        raise HookImportError(f"cannot be stored: {unfit}")
    return doc


def short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


PROJECT_DIR_VAR = "CLAUDE_PROJECT_DIR"


def check_shape(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise HookImportError(f"{where}: {message}")
