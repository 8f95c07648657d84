"""FIM One agent configurations: their hook names as this platform's hooks."""

from __future__ import annotations

from typing import Any

from agents.fim_one_hooks import FIM_ONE_HOOKS
from console.hook_import.plans import (
    FIM_ONE,
    HookImportError,
    ImportPlan,
    PlannedHook,
    Skipped,
    check_shape,
    load_json,
    short,
)
from hooks.catalog import HookDeclarationError, catalog_entries
from hooks.contract import GATE_PRIORITY

# --- FIM One ---------------------------------------------------------------------------------------

FIM_ONE_HOOK_LISTS = ("class_hooks", "builtin")
FIM_ONE_AGENT_ROUTING = {
    "confirmation_mode": "where FIM One sends approvals (card or inline): here the approver policy's channel",
    "confirmation_approver_scope": "who may approve: here the approver policy (admin: Approver policies)",
    "approval_channel_id": "a FIM One channel id: pick the channel on the approver policy here",
}


def our_catalog_names() -> list[str]:
    """The hooks of our catalog an agent may declare (FIM One's aliases apart)."""
    try:
        entries = catalog_entries()
    except HookDeclarationError:
        return []
    return sorted(e["name"] for e in entries if not e["system"] and e["name"] not in FIM_ONE_HOOKS)


def _known_names() -> str:
    return f"FIM One's: {', '.join(sorted(FIM_ONE_HOOKS))}; ours: {', '.join(our_catalog_names())}"


def _fim_one_item(raw: Any, where: str) -> tuple[str, dict[str, Any]]:
    if isinstance(raw, str):
        return raw.strip(), {}
    check_shape(
        isinstance(raw, dict) and isinstance(raw.get("name"), str),
        where,
        'must be a hook name, or {"name": …, "params": {…}}',
    )
    unknown = set(raw) - {"name", "params", "config"}
    check_shape(not unknown, where, f"unknown keys {sorted(unknown)} (keys: name, params or config)")
    check_shape(not ("params" in raw and "config" in raw), where, "give params or config, not both")
    params = raw.get("params", raw.get("config")) or {}
    check_shape(isinstance(params, dict), where, "its params must be an object")
    return raw["name"].strip(), dict(params)


def _fim_one_planned(plan: ImportPlan, name: str, params: dict[str, Any], where: str) -> PlannedHook | None:
    """The declaration of one FIM One built-in, or ``None`` (nothing to declare)."""
    hook = FIM_ONE_HOOKS[name]
    ours: dict[str, Any] = dict(hook.params)
    priority = None
    notes = [f"FIM One's {name} → {hook.here}"]
    for key, value in params.items():
        target = hook.options.get(key)
        if target is None:
            known = ", ".join(sorted(hook.options)) or "none"
            raise HookImportError(f"{where}: {name} has no parameter {key!r} (its parameters: {known})")
        if target == "tools":
            check_shape(isinstance(value, str) and bool(value), where, f"{key} must be a tool-name glob")
            ours["tools"] = value
        elif target == "priority":
            check_shape(
                type(value) is int and value < GATE_PRIORITY,
                where,
                f"priority must be a whole number below {GATE_PRIORITY}",
            )
            priority = value
        else:
            plan.skipped.append(Skipped(f"{where}.{key}", short(repr(value)), target))
    if hook.ours is None:
        plan.notes.append(f"{where} ({name}): {hook.here}")
        return None
    return PlannedHook(where=where, name=hook.ours, kind="class", params=ours, priority=priority, notes=notes)


def fim_one_config_plan(text: str) -> ImportPlan:
    """The declarations a FIM One agent configuration becomes: a FIM One agent (an object with
    ``model_config_json``, whose ``require_confirmation_for_all`` is taken too) or its
    ``model_config_json`` alone. Its ``hooks.class_hooks`` (names, or ``{name, params}`` /
    ``{name, config}``) and ``hooks.builtin`` (names) are read; each FIM One name becomes its
    equivalent here (:data:`agents.fim_one_hooks.FIM_ONE_HOOKS`), a name of our catalog stays
    itself. Raises :class:`HookImportError` for a file of the wrong shape, or naming a hook that is
    neither FIM One's nor ours (the message lists both), or FIM One parameters a hook does not
    have. A hook listed twice is declared once."""
    doc = load_json(text)
    check_shape(isinstance(doc, dict), "(top)", "a FIM One agent (or its model_config_json) is a JSON object")
    agent_fields: dict[str, Any] = {}
    config: Any = doc
    where_config = ""
    if "model_config_json" in doc:
        agent_fields, config, where_config = doc, doc["model_config_json"], "model_config_json."
    plan = ImportPlan(source=FIM_ONE)
    if config is None:
        config = {}
    check_shape(isinstance(config, dict), where_config.rstrip(".") or "(top)", "must be a JSON object")
    hooks = config.get("hooks")
    if hooks is None:
        plan.notes.append("the configuration declares no hooks")
        hooks = {}
    check_shape(isinstance(hooks, dict), f"{where_config}hooks", 'must be an object with "class_hooks"')
    items: list[tuple[str, str, dict[str, Any]]] = []
    for key, value in hooks.items():
        where = f"{where_config}hooks.{key}"
        if key not in FIM_ONE_HOOK_LISTS:
            if value not in (None, [], {}):
                plan.skipped.append(Skipped(where, "", "not a list of FIM One built-in hooks"))
            continue
        if value is None:
            continue
        check_shape(isinstance(value, list), where, "must be a list of hook names")
        for index, raw in enumerate(value):
            name, params = _fim_one_item(raw, f"{where}[{index}]")
            if name:
                items.append((f"{where}[{index}]", name, params))
    ours = set(our_catalog_names())
    unknown = sorted({name for _, name, _ in items if name not in FIM_ONE_HOOKS and name not in ours})
    if unknown:
        raise HookImportError(
            f"unknown hook name(s) {', '.join(repr(n) for n in unknown)}: known names are {_known_names()}"
        )
    declared: set[tuple[str, str]] = set()
    for where, name, params in items:
        planned = (
            _fim_one_planned(plan, name, params, where)
            if name in FIM_ONE_HOOKS
            else PlannedHook(where=where, name=name, kind="class", params=params)
        )
        if planned is None:
            continue
        key = (planned.name, repr(sorted(planned.params.items())))
        if key in declared:
            plan.skipped.append(Skipped(where, name, "listed already: declared once"))
            continue
        declared.add(key)
        plan.hooks.append(planned)
    flag = agent_fields.get("require_confirmation_for_all")
    check_shape(flag is None or type(flag) is bool, "require_confirmation_for_all", "must be true or false")
    plan.require_confirmation_for_all = flag is True
    for key, why in FIM_ONE_AGENT_ROUTING.items():
        if agent_fields.get(key) not in (None, "", "auto"):
            plan.skipped.append(Skipped(key, short(repr(agent_fields[key])), why))
    return plan
