"""The arguments of the tool call tried by "Try this chain", as a form field: one input per
property of the tool's parameter schema (as the hook editor does for hook parameters), and a JSON
box for anything the inputs cannot say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from console.hook_editor.param_inputs import render_param
from console.hook_editor.param_values import MISSING, param_kind, param_label, posted_values, read_posted
from fimone.parsers import loads as json_loads


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


def _arg_label(prop: str, schema: Any) -> str:
    """An argument's label: its schema's title, else its name as the hook editor labels it."""
    return str(schema.get("title") or param_label(prop)) if isinstance(schema, dict) else param_label(prop)


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
        result.values = posted_values(data, base, _schema_properties(spec.parameters))
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
        help_text = schema.get("description") or "" if isinstance(schema, dict) else ""
        if kind == "patterns":
            help_text = f"{help_text} One per line.".strip()
        lines.append(
            render_param(
                kind,
                f"{base}{prop}",
                schema,
                shown,
                label=_arg_label(prop, schema),
                required=prop in required,
                help_text=help_text,
                typed=use_posted,
            )
        )
    if not properties:
        lines.append(format_html('<p class="help">{}</p>', "This tool takes no arguments."))
    return format_html(
        '<div class="tool-args" data-tool="{}"{}><input type="hidden" name="{}_shown" value="1">'
        '<p class="tool-args-title"><strong>{}</strong></p>{}</div>',
        tool,
        "" if mine or not picked else mark_safe(" hidden"),
        base,
        spec.display,
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
            try:
                read = read_posted(schema, value.values.get(prop))
            except ValueError as exc:
                problems.append(f"{_arg_label(prop, schema)}: {exc}")
                continue
            if read is not MISSING:
                args[prop] = read
        if problems:
            raise forms.ValidationError(problems)
        return args
