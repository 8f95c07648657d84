"""An agent's effective hook chain as rows an operator reads: every hook a run of the agent
executes (the system guards, the agent's and the organisation's declarations, the approval
gate), in the order the registry runs them, each with where it comes from and what it applies
to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.hook_editor.param_values import json_text
from console.hook_editor.readable import readable_params
from hooks.catalog import declared_band, hook_catalog, system_band
from hooks.contract import GATE_PRIORITY, Hook

SOURCE_LABELS = {
    "system": "System",
    "organisation": "Organisation-enforced",
    "agent": "Agent",
    "config": "Agent (model config)",
}
SYSTEM_NOTES = {
    "read_only_guard": "blocks writes while the organisation is read-only",
    "confirmation_gate": "the approval gate: asks a human when the tool requires confirmation, "
    "a hook asked for approval, or the agent confirms every call",
    "confirmation_executed": "records that an approved call ran",
}


@dataclass(frozen=True)
class ChainRow:
    """One hook of an agent's effective chain, as the chain panel and the trial show it."""

    position: int
    name: str
    kind: str
    source: str
    point: str
    matcher: str
    priority: int | float
    params: dict[str, Any]
    is_gate: bool = False
    mode: str = "enforce"
    """``shadow``: it runs, but only what it would have done is recorded (``hooks.shadow``)."""

    @property
    def in_shadow(self) -> bool:
        return self.mode == "shadow"

    @property
    def source_label(self) -> str:
        return SOURCE_LABELS.get(self.source, self.source)

    @property
    def note(self) -> str:
        return SYSTEM_NOTES.get(self.name, "")

    @property
    def applies_to(self) -> str:
        """The tools it runs for: its matcher and, for catalog hooks, its ``tools`` parameter."""
        tools = self.params.get("tools") if self.kind == "class" else None
        if isinstance(tools, list):
            tools = ", ".join(str(t) for t in tools)
        parts = [part for part in (self.matcher, tools) if part and part != "*"]
        return " and ".join(parts)

    @property
    def params_text(self) -> str:
        return json_text(self.params) if self.params else ""

    @property
    def params_lines(self) -> list[str]:
        """The parameters as ``Label: value`` lines people read (a catalog hook's tools are in
        :attr:`applies_to`, not repeated here)."""
        shown = {k: v for k, v in self.params.items() if not (k == "tools" and self.kind == "class")}
        return readable_params(shown)


def chain_rows(chain: dict[str, Any]) -> list[ChainRow]:
    """The hooks of a resolved chain (``agents.checks.hook_chain_of``) in the order its registry
    runs them: by point, then by band (system guards, the agent's hooks, the organisation's
    enforced hooks, the gate: docs/design.md §1.12), then by priority, ties in the order of the record
    (declared hooks, then the system hooks), which is the registry's stable sort."""
    catalog = hook_catalog()
    sandboxed = chain.get("sandbox") is not None
    listed: list[tuple[tuple[int, int | float], ChainRow]] = []
    for record in chain.get("declared", []):
        kind = record.get("kind") or "class"
        hook_class = catalog.get(record["name"]) if kind == "class" else None
        band = declared_band(record.get("source"), hook_class or Hook)
        listed.append(
            (
                (band, record["priority"]),
                ChainRow(
                    position=0,
                    name=record["name"],
                    kind=record.get("kind") or "class",
                    source=record.get("source", "agent"),
                    point=record["point"],
                    matcher=record.get("matcher") or "",
                    priority=record["priority"],
                    params=record.get("params") or {},
                    mode=record.get("mode") or "enforce",
                ),
            )
        )
    for name in chain.get("system", []):
        cls = catalog.get(name)
        if cls is None or (sandboxed and getattr(cls, "asks_humans", False)):
            continue
        listed.append(
            (
                (system_band(cls), cls.priority),
                ChainRow(
                    position=0,
                    name=name,
                    kind="system",
                    source="system",
                    point=str(cls.point),
                    matcher="",
                    priority=cls.priority,
                    params={},
                    is_gate=cls.priority == GATE_PRIORITY and str(cls.point) == "PreToolUse",
                ),
            )
        )
    ordered = [row for _, row in sorted(listed, key=lambda pair: pair[0])]
    points = ("SessionStart", "PreToolUse", "PostToolUse")
    ordered.sort(key=lambda row: points.index(row.point) if row.point in points else 9)
    return [ChainRow(**{**row.__dict__, "position": index}) for index, row in enumerate(ordered, start=1)]
