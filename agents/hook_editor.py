"""The hook editor of the admin: a hook declaration's parameters as a form built from the catalog
hook's parameter schema, and the effective chain of an agent as rows an operator reads.

Parameters are typed into one input per schema property (numbers, choices, one pattern per line,
rows of conditions, JSON only for free-form objects) and stored as the declaration's ``params``
object. Command, python and http hooks, and catalog hooks that do not describe their parameters,
keep a JSON text box. The page's own script only shows the inputs of the hook picked; without it
every hook's inputs show and only the picked hook's are read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from agents.models import ConnectorAction
from agents.tools.toolbox import ToolboxError, tools_for_agent
from fimone.parsers import loads as json_loads
from hooks.catalog import HookDeclarationError, catalog_entries
from hooks.contract import GATE_PRIORITY, Hook

OWN_PREFIX = "own:"
"""``hook`` choice values for a hook of the operator's own (``own:command`` …): kind, not name."""

OWN_KINDS = {
    "command": "Command hook (runs a program)",
    "python": "Python hook (a class on the server's path)",
    "http": "HTTP hook (calls a URL, signed)",
}
CONDITION_ROWS = 3
"""Rows offered for a list of objects (``confirm_when`` conditions): at least this many, and always
one empty row beyond those filled."""

_MISSING: Any = object()


def declarable_entries() -> list[dict[str, Any]]:
    """The catalog hooks an operator may declare, by point then name."""
    order = {"PreToolUse": 0, "PostToolUse": 1, "SessionStart": 2}
    try:
        listed = catalog_entries()
    except HookDeclarationError:  # a broken hook module: saving says which; the page still opens
        return []
    entries = [e for e in listed if not e["system"]]
    return sorted(entries, key=lambda e: (order.get(e["point"], 9), e["name"]))


def hook_choices() -> list[tuple[str, Any]]:
    """The ``hook`` select: catalog hooks grouped by point, each with its description, then the
    operator's own kinds."""
    groups: dict[str, list[tuple[str, str]]] = {}
    labels = {
        "PreToolUse": "Before the tool runs (PreToolUse)",
        "PostToolUse": "On the tool's result (PostToolUse)",
        "SessionStart": "When a run starts (SessionStart)",
    }
    for entry in declarable_entries():
        text = f"{entry['name']} — {entry['description']}" if entry["description"] else entry["name"]
        groups.setdefault(labels.get(entry["point"], entry["point"]), []).append((entry["name"], text))
    own = [(f"{OWN_PREFIX}{kind}", text) for kind, text in OWN_KINDS.items()]
    return [("", "— pick a hook —"), *groups.items(), ("Your own hooks", own)]


# --- one parameter: which input, how it reads ------------------------------------------------------


def _is_patterns(schema: dict[str, Any]) -> bool:
    options = schema.get("oneOf")
    if not isinstance(options, list):
        return False
    types = {o.get("type") for o in options if isinstance(o, dict)}
    return types == {"string", "array"}


def param_kind(schema: Any) -> str:
    """The input for a property schema: choice, integer, number, boolean, text, patterns (one
    per line), rows (a list of objects), or json (anything else)."""
    if not isinstance(schema, dict):
        return "json"
    if isinstance(schema.get("enum"), list):
        return "choice"
    if _is_patterns(schema):
        return "patterns"
    kind = schema.get("type")
    if kind in ("integer", "number", "boolean"):
        return str(kind)
    if kind == "string":
        return "text"
    items = schema.get("items")
    if kind == "array" and isinstance(items, dict) and isinstance(items.get("properties"), dict):
        return "rows"
    return "json"


def _label(name: str) -> str:
    return name.replace("_", " ").capitalize()


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _loose(text: str) -> Any:
    """A value typed where anything goes: JSON if it reads as JSON (50000, true, ["a"]), else
    the text itself (also when it nests deeper than the bounded reader accepts)."""
    try:
        return json_loads(text)
    except ValueError:
        return text


def read_value(kind: str, schema: dict[str, Any], raw: Any) -> Any:
    """The value typed for one parameter, ``_MISSING`` if left blank, or ``ValueError`` saying
    what is expected in an operator's words."""
    if kind == "boolean":
        return raw == "on" if raw is not None else _MISSING
    if kind == "rows":
        return raw if raw else _MISSING
    text = (raw or "").strip() if isinstance(raw, str) else ""
    if not text:
        return _MISSING
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("enter a whole number") from None
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError("enter a number") from None
        return int(number) if number.is_integer() and "." not in text else number
    if kind == "choice":
        options = [str(o) for o in schema["enum"]]
        if text not in options:
            raise ValueError(f"choose one of {', '.join(options)}")
        return schema["enum"][options.index(text)]
    if kind == "patterns":
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[0] if len(lines) == 1 else lines
    if kind == "text":
        return raw if "\n" in raw else text
    try:
        return json_loads(text)
    except ValueError as exc:  # InvalidJSON: not JSON, or nested too deep (never RecursionError)
        example = '{"currency": "EUR"}' if schema.get("type") == "object" else '["a", "b"]'
        raise ValueError(f"enter JSON, e.g. {example} ({exc})") from None


def format_value(kind: str, value: Any) -> Any:
    """A stored parameter as its input shows it."""
    if value is _MISSING or value is None:
        return "" if kind not in ("rows", "boolean") else ([] if kind == "rows" else None)
    if kind == "patterns":
        return "\n".join(value) if isinstance(value, list) else str(value)
    if kind in ("integer", "number", "text", "choice"):
        return str(value) if not isinstance(value, bool) else _json_text(value)
    if kind == "boolean":
        return "on" if value else None
    if kind == "rows":
        return value if isinstance(value, list) else []
    return _json_text(value)


# --- the posted form of a declaration's parameters --------------------------------------------------


@dataclass
class ParamsInput:
    """What the parameters part of one row posted: the hook picked (``None`` when the page did
    not post a pick), the JSON text box, and the raw inputs of the picked hook's parameters."""

    hook: str | None
    raw: str
    picked: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    structured: bool = False


def _prefix_of(name: str) -> str:
    return name[: -len("params")] if name.endswith("params") else f"{name}-"


class HookParamsWidget(forms.Widget):
    """Every declarable hook's parameter inputs (one block per hook) and the JSON text box of
    the operator's own hooks. Inputs are named ``<params>__<hook>__<param>`` (rows:
    ``…__<param>__<n>__<field>``), so a row's parameters travel with the formset's prefix."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> ParamsInput:
        prefix = _prefix_of(name)
        hook = data.get(f"{prefix}hook")
        picked = hook
        if picked is None and (data.get(f"{prefix}kind") or "class") == "class":
            picked = data.get(f"{prefix}name")
        result = ParamsInput(hook=hook, raw=data.get(name) or "", picked=picked or "")
        entry = _entry(picked or "")
        if entry is None:
            return result
        base = f"{name}__{entry['name']}__"
        if f"{base}_shown" not in data:  # posted without the editor's inputs: the JSON box counts
            return result
        result.structured = True
        for param, schema in _properties(entry).items():
            kind = param_kind(schema)
            if kind == "rows":
                result.values[param] = _read_rows(data, f"{base}{param}", schema)
            elif kind == "boolean":
                result.values[param] = data.get(f"{base}{param}")
            else:
                result.values[param] = data.get(f"{base}{param}", "")
        if not _properties(entry):
            result.values["__json__"] = data.get(f"{base}__json__", "")
        return result

    picked = ""
    """The hook the row holds (set by the form): its inputs show, filled with its parameters."""

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        posted = value if isinstance(value, ParamsInput) else None
        stored = value if isinstance(value, dict) else {}
        picked = posted.picked if posted is not None else self.picked
        blocks = [_render_hook_block(name, entry, picked, posted, stored) for entry in declarable_entries()]
        raw = posted.raw if posted is not None else (_json_text(stored) if stored else "{}")
        own_hidden = " hidden" if _entry(picked) is not None else ""
        own = format_html(
            '<div class="hook-params" data-hook="{}"{}><p class="help">Parameters as JSON — command: '
            '<code>{{"argv": ["/path/to/script"], "env": {{}}}}</code>; http: <code>{{"url": '
            '"https://…"}}</code>; python: <code>{{"path": "package.module.Class", …}}</code>.</p>'
            '<textarea name="{}" rows="3" cols="60" class="vLargeTextField hook-params-json">{}</textarea>'
            "</div>",
            OWN_PREFIX,
            mark_safe(own_hidden),  # noqa: S308  # a constant
            name,
            raw,
        )
        return mark_safe(  # noqa: S308  # every piece is built by format_html
            f'<div class="hook-params-editor" data-name="{name}">{"".join(blocks)}{own}</div>'
        )


def _entry(name: str) -> dict[str, Any] | None:
    for entry in declarable_entries():
        if entry["name"] == name:
            return entry
    return None


def _properties(entry: dict[str, Any]) -> dict[str, Any]:
    schema = entry.get("params_schema") or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def _required(entry: dict[str, Any]) -> set[str]:
    schema = entry.get("params_schema") or {}
    return set(schema.get("required") or []) if isinstance(schema, dict) else set()


def _read_rows(data: Any, base: str, schema: dict[str, Any]) -> list[dict[str, str]]:
    columns = list(schema["items"]["properties"])
    rows = []
    index = 0
    while any(f"{base}__{index}__{col}" in data for col in columns):
        rows.append({col: data.get(f"{base}__{index}__{col}", "") for col in columns})
        index += 1
    return rows


def _input(kind: str, name: str, schema: dict[str, Any], shown: Any, *, label: str) -> SafeString:
    placeholder = ""
    if "default" in schema:
        placeholder = f"default: {format_value(kind, schema['default'])}"
    if kind == "choice":
        options = [("", f"— {placeholder or 'choose'} —")] + [(str(o), str(o)) for o in schema["enum"]]
        return format_html(
            '<select name="{}" aria-label="{}">{}</select>',
            name,
            label,
            format_html_join(
                "",
                '<option value="{}"{}>{}</option>',
                ((v, mark_safe(" selected") if v == shown else "", t) for v, t in options),
            ),
        )
    if kind == "boolean":
        checked = mark_safe(" checked") if shown == "on" else ""
        return format_html('<input type="checkbox" name="{}" aria-label="{}"{}>', name, label, checked)
    if kind in ("patterns", "json") or (kind == "text" and name.endswith("__text")):
        return format_html(
            '<textarea name="{}" rows="2" cols="40" aria-label="{}" placeholder="{}">{}</textarea>',
            name,
            label,
            placeholder or ("one per line" if kind == "patterns" else ""),
            shown or "",
        )
    input_type = "number" if kind in ("integer", "number") else "text"
    step = mark_safe(' step="any"') if kind == "number" else ""
    return format_html(
        '<input type="{}" name="{}" value="{}" aria-label="{}" placeholder="{}"{}>',
        input_type,
        name,
        shown or "",
        label,
        placeholder,
        step,
    )


def _render_rows(
    name: str, schema: dict[str, Any], rows: list[Any], *, label: str, typed: bool
) -> SafeString:
    """A list of objects as rows of inputs (``typed``: ``rows`` are the texts posted back)."""
    columns = schema["items"]["properties"]
    head = format_html_join("", "<th>{}</th>", ((_label(c),) for c in columns))
    body = []
    for index in range(max(CONDITION_ROWS, len(rows) + 1)):
        row = rows[index] if index < len(rows) else {}
        cells = []
        for col, col_schema in columns.items():
            kind = param_kind(col_schema)
            if kind == "json":
                kind = "loose"
            value = row.get(col, _MISSING) if isinstance(row, dict) else _MISSING
            if typed:
                shown = "" if value is _MISSING else value
            elif kind == "loose":
                # A text that would read back as something else ("123", "true") is shown quoted.
                plain = isinstance(value, str) and _loose(value) == value
                shown = "" if value is _MISSING else (value if plain else _json_text(value))
            else:
                shown = format_value(kind, value)
            cell_label = f"{label} {index + 1}: {col}"
            input_kind = "text" if kind == "loose" else kind
            cells.append(format_html("<td>{}</td>", _input(input_kind, f"{name}__{index}__{col}", col_schema,
                                                            shown, label=cell_label)))  # fmt: skip
        body.append(format_html("<tr>{}</tr>", mark_safe("".join(cells))))  # noqa: S308
    return format_html(
        '<table class="hook-param-rows"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
        head,
        mark_safe("".join(body)),  # noqa: S308
    )


def _render_hook_block(
    name: str, entry: dict[str, Any], picked: str, posted: ParamsInput | None, stored: dict[str, Any]
) -> SafeString:
    hook = entry["name"]
    base = f"{name}__{hook}__"
    mine = picked == hook
    use_posted = posted is not None and posted.structured and mine
    defaults = f"priority {entry['priority']}, timeout {entry['timeout']:g} s, on error: {entry['on_error']}"
    lines = []
    properties = _properties(entry)
    required = _required(entry)
    for param, schema in properties.items():
        kind = param_kind(schema)
        if use_posted:
            shown = posted.values.get(param)  # type: ignore[union-attr]
        else:
            shown = format_value(kind, stored.get(param, _MISSING) if mine else _MISSING)
        label = _label(param)
        if kind == "rows":
            widget = _render_rows(f"{base}{param}", schema, shown or [], label=label, typed=use_posted)
        else:
            widget = _input(kind, f"{base}{param}", schema, shown, label=label)
        help_bits = [schema.get("description") or ""]
        if kind == "patterns":
            help_bits.append("One per line.")
        if kind == "rows":
            help_bits.append("Blank rows are ignored; a value is read as JSON when it can be (50000, true).")
        if "default" in schema:
            help_bits.append(f"Default: {format_value(kind, schema['default'])}.")
        lines.append(
            format_html(
                '<div class="hook-param"><label>{}{}</label> {}<div class="help">{}</div></div>',
                label,
                mark_safe(' <span class="required" title="required">*</span>') if param in required else "",
                widget,
                " ".join(b for b in help_bits if b),
            )
        )
    if not properties:
        raw = (
            posted.values.get("__json__", "")
            if use_posted
            else (_json_text(stored) if mine and stored else "{}")
        )
        lines.append(
            format_html(
                '<div class="hook-param"><label>Parameters (JSON)</label> '
                '<textarea name="{}__json__" rows="2" cols="60">{}</textarea></div>',
                base,
                raw,
            )
        )
    if "tools" in properties:
        defaults += "; it runs only for the tools in its Tools parameter (it has no matcher)"
    return format_html(
        '<div class="hook-params" data-hook="{}"{}{}><input type="hidden" name="{}_shown" value="1">'
        '<p class="hook-description"><strong>{}</strong> ({}) — {} '
        '<span class="help">Defaults: {}.</span></p>'
        "{}</div>",
        hook,
        "" if mine else mark_safe(" hidden"),
        mark_safe(' data-chooses-tools="1"') if "tools" in properties else "",
        base,
        hook,
        entry["point"],
        entry["description"],
        defaults,
        mark_safe("".join(lines)),  # noqa: S308
    )


class HookParamsField(forms.Field):
    """Reads :class:`ParamsInput` into the declaration's ``params`` object: the picked catalog
    hook's inputs when the editor posted them, otherwise the JSON text box."""

    widget = HookParamsWidget

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.pop("encoder", None)
        kwargs.pop("decoder", None)
        kwargs.pop("max_length", None)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        if not isinstance(value, ParamsInput):
            return {}
        if not value.structured:
            return _read_json_box(value.raw)
        entry = _entry(value.picked)
        if entry is None:
            return _read_json_box(value.raw)
        properties = _properties(entry)
        if not properties:
            return _read_json_box(value.values.get("__json__", ""))
        params: dict[str, Any] = {}
        problems: list[str] = []
        required = _required(entry)
        for param, schema in properties.items():
            kind = param_kind(schema)
            try:
                if kind == "rows":
                    read = _rows_value(schema, value.values.get(param) or [])
                else:
                    read = read_value(kind, schema, value.values.get(param))
            except ValueError as exc:
                problems.append(f"{_label(param)}: {exc}")
                continue
            if read is _MISSING:
                if param in required:
                    problems.append(f"{_label(param)}: this parameter is required")
                continue
            params[param] = read
        if problems:
            raise forms.ValidationError(problems)
        return params

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial or {})
        except forms.ValidationError:
            return True


def _read_json_box(text: str) -> dict[str, Any]:
    text = (text or "").strip()
    if not text:
        return {}
    try:
        params = json_loads(text)
    except ValueError as exc:  # InvalidJSON
        raise forms.ValidationError(f"Parameters: enter a JSON object ({exc}).") from None
    if not isinstance(params, dict):
        raise forms.ValidationError(
            'Parameters: enter a JSON object, e.g. {"argv": ["/opt/hooks/check.sh"]}.'
        )
    return params


def _rows_value(schema: dict[str, Any], rows: list[dict[str, str]]) -> Any:
    columns = schema["items"]["properties"]
    required = set(schema["items"].get("required") or [])
    out = []
    for number, row in enumerate(rows, start=1):
        if not any((row.get(c) or "").strip() for c in columns):
            continue
        item: dict[str, Any] = {}
        for col, col_schema in columns.items():
            text = (row.get(col) or "").strip()
            kind = param_kind(col_schema)
            if not text:
                if col in required:
                    raise ValueError(f"row {number}: {col} is required")
                continue
            if kind == "json":
                item[col] = _loose(text)
            else:
                try:
                    item[col] = read_value(kind, col_schema, text)
                except ValueError as exc:
                    raise ValueError(f"row {number}: {col}: {exc}") from None
        out.append(item)
    return out if out else _MISSING


# --- the effective chain, as rows ---------------------------------------------------------------------

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
class Why:
    """One reason the approval gate asks a human, in an operator's words, with where to change it
    (``url`` and ``link_text``; empty when it is changed on the page that shows it)."""

    text: str
    url: str = ""
    link_text: str = ""

    def __str__(self) -> str:
        return self.text


def describe_condition(condition: Any) -> str:
    """A ``confirm_when`` condition as people read it: ``amount >= 50000``."""
    if not isinstance(condition, dict):
        return _json_text(condition)
    value = condition.get("value")
    shown = value if isinstance(value, str) and _loose(value) == value else _json_text(value)
    return f"{condition.get('field', '?')} {condition.get('op', '?')} {shown}"


def describe_conditions(params: dict[str, Any]) -> str:
    """The conditions of a ``confirm_when``-like declaration joined by its mode (``all``: and)."""
    conditions = params.get("conditions")
    if not isinstance(conditions, list):
        return ""
    joiner = " or " if params.get("mode") == "any" else " and "
    return joiner.join(describe_condition(c) for c in conditions)


def readable_value(value: Any) -> str:
    """A parameter's value as a line of text: lists joined, objects as ``key: value`` pairs,
    conditions as ``field op value``; JSON only for what has no simpler reading."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and {"field", "op"} <= set(v) for v in value):
            return "; ".join(describe_condition(v) for v in value)
        if all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
            return ", ".join(str(v) for v in value)
    if isinstance(value, dict) and all(isinstance(v, str | int | float | bool) for v in value.values()):
        return ", ".join(f"{k}: {readable_value(v)}" for k, v in value.items())
    return _json_text(value)


def readable_params(params: dict[str, Any]) -> list[str]:
    """A declaration's parameters as ``Label: value`` lines (the editor's labels)."""
    return [f"{_label(key)}: {readable_value(value)}" for key, value in params.items()]


def chooses_tools(name: str) -> bool:
    """Whether the catalog hook ``name`` picks its tools with a ``tools`` parameter (then the
    declaration's matcher is not offered: one hook, one place to choose tools)."""
    entry = _entry(name)
    return entry is not None and "tools" in _properties(entry)


def connector_action_url(action: Any) -> str:
    """Where an operator changes a connector action: its own admin page if it has one, else its
    connector's page (the actions are listed there)."""
    from django.contrib import admin
    from django.urls import reverse

    if admin.site.is_registered(type(action)):
        return reverse("admin:agents_connectoraction_change", args=[action.pk])
    return reverse("admin:agents_connector_change", args=[action.connector_id])


def tool_flag_reason(agent: Any, tool_name: str) -> Why:
    """Why the tool ``tool_name`` of ``agent`` requires confirmation by itself, and where that is
    changed (the connector action's "requires confirmation" box)."""
    slug, _, action_name = tool_name.partition("__")
    action = (
        ConnectorAction.objects.filter(
            agents=agent, connector__organization_id=agent.organization_id, connector__slug=slug
        )
        .select_related("connector")
        .filter(name=action_name)
        .first()
    )
    if action is not None:
        return Why(
            f"the tool “{action.title}” ({tool_name}) is flagged “requires confirmation” in connector "
            f"{action.connector.name} — change it there",
            url=connector_action_url(action),
            link_text=f"{action.connector.name}: {action.title}",
        )
    if action_name == "sql_execute":
        return Why(f"the tool {tool_name} writes to a database, so it always asks")
    return Why(f"the tool {tool_name} requires confirmation")


CONFIRMS_ALL = Why("the agent confirms every call (“Require confirmation for all” on this agent's page)")


def hook_ask_reason(name: str, params: dict[str, Any]) -> Why:
    """What a hook that asks for approval asks on, from its parameters."""
    conditions = describe_conditions(params)
    tools = params.get("tools")
    on = f" on {readable_value(tools)}" if tools not in (None, "", "*") else ""
    reason = f" ({params['reason']})" if params.get("reason") else ""
    if conditions:
        return Why(f"{name} asks when: {conditions}{on}{reason}")
    return Why(f"{name} may ask{on}{reason}")


def gate_reasons(agent: Any, rows: list[ChainRow]) -> list[Why]:
    """Everything that makes the approval gate of ``agent`` ask a human: the agent confirming every
    call, each of its tools flagged "requires confirmation" (with where to change that), and each
    hook of the chain that can ask (``confirm_when`` with its conditions)."""
    reasons: list[Why] = []
    if agent.require_confirmation_for_all:
        reasons.append(CONFIRMS_ALL)
    try:
        tools = tools_for_agent(agent)
    except ToolboxError:
        tools = {}
    reasons += [
        tool_flag_reason(agent, name) for name, tool in tools.items() if tool.spec.requires_confirmation
    ]
    reasons += [
        hook_ask_reason(row.name, row.params)
        for row in rows
        if row.point == "PreToolUse" and row.name in ASKING_HOOKS
    ]
    return reasons


ASKING_HOOKS = frozenset({"confirm_when"})
"""Catalog hooks whose answer can be "ask a human" (the others allow, rewrite or block)."""


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
        return _json_text(self.params) if self.params else ""

    @property
    def params_lines(self) -> list[str]:
        """The parameters as ``Label: value`` lines people read (a catalog hook's tools are in
        :attr:`applies_to`, not repeated here)."""
        shown = {k: v for k, v in self.params.items() if not (k == "tools" and self.kind == "class")}
        return readable_params(shown)


def chain_rows(chain: dict[str, Any]) -> list[ChainRow]:
    """The hooks of a resolved chain (``agents.checks.hook_chain_of``) in the order its registry
    runs them: by point, then by band (system guards, the agent's hooks, the organisation's
    enforced hooks, the gate: DESIGN §1.12), then by priority, ties in the order of the record
    (declared hooks, then the system hooks), which is the registry's stable sort."""
    from hooks.catalog import declared_band, hook_catalog, system_band

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


# --- "Try this chain": a tool's arguments as inputs built from its JSON schema -------------------------


@dataclass
class ArgsInput:
    """What the arguments part of the trial form posted: the tool picked, the JSON box and the
    raw inputs of the picked tool's arguments (``structured``: the page posted them)."""

    tool: str
    raw: str
    values: dict[str, Any] = field(default_factory=dict)
    structured: bool = False


def _schema_properties(schema: Any) -> dict[str, Any]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def _schema_required(schema: Any) -> set[str]:
    required = schema.get("required") if isinstance(schema, dict) else None
    return {str(name) for name in required} if isinstance(required, list) else set()


class ToolArgsWidget(forms.Widget):
    """One block of inputs per tool (one input per property of its parameters' JSON schema, as the
    hook editor does for hook parameters), and a JSON box for anything the inputs cannot say.
    Inputs are named ``<name>__<tool>__<property>``; the page's script shows the picked tool's
    block only (without it every block shows, each under its tool's title)."""

    tools: dict[str, Any]
    """``name`` → the tool's :class:`agents.tools.base.ToolSpec` (set by the form)."""

    def __init__(self, attrs: Any = None) -> None:
        super().__init__(attrs)
        self.tools = {}
        self.picked = ""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> ArgsInput:
        tool = data.get("tool_name") or ""
        result = ArgsInput(tool=tool, raw=data.get(name) or "")
        spec = self.tools.get(tool)
        base = f"{name}__{tool}__"
        if spec is None or f"{base}_shown" not in data:
            return result
        result.structured = True
        for prop, schema in _schema_properties(spec.parameters).items():
            kind = param_kind(schema)
            if kind == "rows":
                result.values[prop] = _read_rows(data, f"{base}{prop}", schema)
            elif kind == "boolean":
                result.values[prop] = data.get(f"{base}{prop}")
            else:
                result.values[prop] = data.get(f"{base}{prop}", "")
        return result

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        posted = value if isinstance(value, ArgsInput) else None
        picked = posted.tool if posted is not None else self.picked
        blocks = [_render_tool_block(name, tool, spec, picked, posted) for tool, spec in self.tools.items()]
        raw = posted.raw if posted is not None else ""
        advanced = format_html(
            '<details class="tool-args-json"{}><summary>Arguments as JSON (advanced)</summary>'
            '<p class="help">Typed here, this object is used instead of the inputs above, e.g. '
            '<code>{{"purchase_id": "PO-1001", "amount": 60000}}</code>.</p>'
            '<textarea name="{}" rows="3" cols="60" spellcheck="false" aria-label="Arguments as JSON">'
            "{}</textarea></details>",
            mark_safe(" open") if raw.strip() else "",  # a constant
            name,
            raw,
        )
        return mark_safe(  # noqa: S308  # every piece is built by format_html
            f'<div class="tool-args-editor">{"".join(blocks)}{advanced}</div>'
        )


def _render_tool_block(name: str, tool: str, spec: Any, picked: str, posted: ArgsInput | None) -> SafeString:
    base = f"{name}__{tool}__"
    mine = picked == tool
    use_posted = posted is not None and posted.structured and mine
    properties = _schema_properties(spec.parameters)
    required = _schema_required(spec.parameters)
    lines = []
    for prop, schema in properties.items():
        kind = param_kind(schema)
        shown = posted.values.get(prop) if use_posted else ("" if kind != "rows" else [])  # type: ignore[union-attr]
        label = str(schema.get("title") or _label(prop)) if isinstance(schema, dict) else _label(prop)
        if kind == "rows":
            widget = _render_rows(f"{base}{prop}", schema, shown or [], label=label, typed=use_posted)
        else:
            widget = _input(kind, f"{base}{prop}", schema, shown, label=label)
        help_text = schema.get("description") or "" if isinstance(schema, dict) else ""
        if kind == "patterns":
            help_text = f"{help_text} One per line.".strip()
        lines.append(
            format_html(
                '<div class="hook-param"><label>{}{}</label> {}<div class="help">{}</div></div>',
                label,
                mark_safe(' <span class="required" title="required">*</span>') if prop in required else "",
                widget,
                help_text,
            )
        )
    if not properties:
        lines.append(format_html('<p class="help">{}</p>', "This tool takes no arguments."))
    return format_html(
        '<div class="tool-args" data-tool="{}"{}><input type="hidden" name="{}_shown" value="1">'
        '<p class="tool-args-title"><strong>{}</strong> <span class="help">({})</span></p>{}</div>',
        tool,
        "" if mine or not picked else mark_safe(" hidden"),
        base,
        spec.display,
        tool,
        mark_safe("".join(lines)),  # noqa: S308
    )


class ToolArgsField(forms.Field):
    """Reads :class:`ArgsInput` into the call's arguments: the JSON box when something is typed
    in it, else the picked tool's inputs; a mistake is told per argument, in an operator's
    words."""

    widget = ToolArgsWidget

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> dict[str, Any] | None:
        if not isinstance(value, ArgsInput):
            return {}
        text = value.raw.strip()
        if text:
            try:
                args = json_loads(text)
            except ValueError as exc:  # InvalidJSON, nested too deep included
                raise forms.ValidationError(f"Enter the arguments as a JSON object ({exc}).") from None
            if not isinstance(args, dict):
                raise forms.ValidationError('Enter the arguments as a JSON object, e.g. {"amount": 100}.')
            return args
        spec = self.widget.tools.get(value.tool)
        if spec is None or not value.structured:
            return {}
        args: dict[str, Any] = {}
        problems: list[str] = []
        for prop, schema in _schema_properties(spec.parameters).items():
            kind = param_kind(schema)
            label = str(schema.get("title") or _label(prop)) if isinstance(schema, dict) else _label(prop)
            try:
                if kind == "rows":
                    read = _rows_value(schema, value.values.get(prop) or [])
                else:
                    read = read_value(
                        kind, schema if isinstance(schema, dict) else {}, value.values.get(prop)
                    )
            except ValueError as exc:
                problems.append(f"{label}: {exc}")
                continue
            if read is not _MISSING:
                args[prop] = read
        if problems:
            raise forms.ValidationError(problems)
        return args
