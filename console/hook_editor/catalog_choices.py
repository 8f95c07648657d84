"""The hooks an operator may pick in the editor: the declarable catalog hooks (by point, then
name), the ``hook`` select built from them and the operator's own kinds, and what a catalog
hook's parameter schema asks for.
"""

from __future__ import annotations

from typing import Any

from hooks.catalog import HookDeclarationError, catalog_entries

OWN_PREFIX = "own:"
"""``hook`` choice values for a hook of the operator's own (``own:command`` …): kind, not name."""

OWN_KINDS = {
    "command": "Command hook (runs a program)",
    "python": "Python hook (a class on the server's path)",
    "http": "HTTP hook (calls a URL, signed)",
    "prompt": "Prompt hook (a model judges the call)",
}


def declarable_entries() -> list[dict[str, Any]]:
    """The catalog hooks an operator may declare, by point then name."""
    order = {"PreToolUse": 0, "PostToolUse": 1, "SessionStart": 2}
    try:
        listed = catalog_entries()
    except HookDeclarationError:  # a broken hook module: saving says which; the page still opens
        return []
    entries = [e for e in listed if not e["system"]]
    return sorted(entries, key=lambda e: (order.get(e["point"], 9), e["name"]))


def hook_choices(*, keep: str = "") -> list[tuple[str, Any]]:
    """The ``hook`` select: catalog hooks grouped by point, each with its description, then the
    operator's own kinds. A hook's other names (``alias_of``: a former name, another product's)
    are not offered — they would list one hook twice — but for ``keep``, the name a saved row
    already uses."""
    groups: dict[str, list[tuple[str, str]]] = {}
    labels = {
        "PreToolUse": "Before the tool runs (PreToolUse)",
        "PostToolUse": "On the tool's result (PostToolUse)",
        "SessionStart": "When a run starts (SessionStart)",
    }
    for entry in declarable_entries():
        if entry.get("alias_of") and entry["name"] != keep:
            continue
        text = f"{entry['name']} — {entry['description']}" if entry["description"] else entry["name"]
        groups.setdefault(labels.get(entry["point"], entry["point"]), []).append((entry["name"], text))
    own = [(f"{OWN_PREFIX}{kind}", text) for kind, text in OWN_KINDS.items()]
    return [("", "— pick a hook —"), *groups.items(), ("Your own hooks", own)]


def declarable_entry(name: str) -> dict[str, Any] | None:
    """The declarable catalog hook ``name``, or ``None`` (an own hook, a system hook, unknown)."""
    for entry in declarable_entries():
        if entry["name"] == name:
            return entry
    return None


def entry_properties(entry: dict[str, Any]) -> dict[str, Any]:
    """The properties of a catalog hook's parameter schema (empty when it describes none)."""
    schema = entry.get("params_schema") or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def entry_required(entry: dict[str, Any]) -> set[str]:
    """The parameters a catalog hook's schema requires."""
    schema = entry.get("params_schema") or {}
    return set(schema.get("required") or []) if isinstance(schema, dict) else set()


def chooses_tools(name: str) -> bool:
    """Whether the catalog hook ``name`` picks its tools with a ``tools`` parameter (then the
    declaration's matcher is not offered: one hook, one place to choose tools)."""
    entry = declarable_entry(name)
    return entry is not None and "tools" in entry_properties(entry)
