"""A hook declaration's ``params`` as a form field: one input per property of the picked catalog
hook's parameter schema, or a JSON text box for the operator's own hooks (command, python, http)
and for catalog hooks that do not describe their parameters.

The widget renders every declarable hook's inputs; the page's script shows only the picked
hook's, and without it every hook's inputs show and only the picked hook's are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from approvals.condition_rows import ConditionRowsWidget
from console.hook_editor.catalog_choices import (
    OWN_PREFIX,
    declarable_entries,
    declarable_entry,
    entry_properties,
    entry_required,
)
from console.hook_editor.param_inputs import render_param
from console.hook_editor.param_values import (
    MISSING,
    format_value,
    json_text,
    param_kind,
    param_label,
    posted_values,
    read_posted,
)
from fimone.parsers import loads as json_loads


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
    ``…__<param>__<n>__<field>``; conditions: ``…__<param>-field`` and so on, the one condition
    editor's), so a row's parameters travel with the formset's prefix."""

    Media = ConditionRowsWidget.Media

    def value_from_datadict(self, data: Any, files: Any, name: str) -> ParamsInput:
        prefix = _prefix_of(name)
        hook = data.get(f"{prefix}hook")
        picked = hook
        if picked is None and (data.get(f"{prefix}kind") or "class") == "class":
            picked = data.get(f"{prefix}name")
        result = ParamsInput(hook=hook, raw=data.get(name) or "", picked=picked or "")
        entry = declarable_entry(picked or "")
        if entry is None:
            return result
        base = f"{name}__{entry['name']}__"
        if f"{base}_shown" not in data:  # posted without the editor's inputs: the JSON box counts
            return result
        result.structured = True
        result.values = posted_values(data, base, entry_properties(entry))
        if not entry_properties(entry):
            result.values["__json__"] = data.get(f"{base}__json__", "")
        return result

    picked = ""
    """The hook the row holds (set by the form): its inputs show, filled with its parameters."""

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        posted = value if isinstance(value, ParamsInput) else None
        stored = value if isinstance(value, dict) else {}
        picked = posted.picked if posted is not None else self.picked
        blocks = [_render_hook_block(name, entry, picked, posted, stored) for entry in declarable_entries()]
        raw = posted.raw if posted is not None else (json_text(stored) if stored else "{}")
        own_hidden = " hidden" if declarable_entry(picked) is not None else ""
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


def _render_hook_block(
    name: str, entry: dict[str, Any], picked: str, posted: ParamsInput | None, stored: dict[str, Any]
) -> SafeString:
    hook = entry["name"]
    base = f"{name}__{hook}__"
    mine = picked == hook
    use_posted = posted is not None and posted.structured and mine
    defaults = f"priority {entry['priority']}, timeout {entry['timeout']:g} s, on error: {entry['on_error']}"
    lines = []
    properties = entry_properties(entry)
    required = entry_required(entry)
    for param, schema in properties.items():
        kind = param_kind(schema)
        if use_posted:
            shown = posted.values.get(param)  # type: ignore[union-attr]
        else:
            shown = format_value(kind, stored.get(param, MISSING) if mine else MISSING)
        help_bits = [schema.get("description") or ""]
        if kind == "patterns":
            help_bits.append("One per line.")
        if kind == "rows":
            help_bits.append("Blank rows are ignored; a value is read as JSON when it can be (50000, true).")
        if kind == "conditions":
            help_bits = ["Blank rows are ignored. A field of a nested object by its path (payee.iban)."]
        if "default" in schema:
            help_bits.append(f"Default: {format_value(kind, schema['default'])}.")
        lines.append(
            render_param(
                kind,
                f"{base}{param}",
                schema,
                shown,
                label=param_label(param),
                required=param in required,
                help_text=" ".join(b for b in help_bits if b),
                typed=use_posted,
            )
        )
    if not properties:
        raw = (
            posted.values.get("__json__", "")
            if use_posted
            else (json_text(stored) if mine and stored else "{}")
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
        entry = declarable_entry(value.picked)
        if entry is None:
            return _read_json_box(value.raw)
        properties = entry_properties(entry)
        if not properties:
            return _read_json_box(value.values.get("__json__", ""))
        params: dict[str, Any] = {}
        problems: list[str] = []
        required = entry_required(entry)
        for param, schema in properties.items():
            try:
                read = read_posted(schema, value.values.get(param))
            except ValueError as exc:
                problems.append(f"{param_label(param)}: {exc}")
                continue
            if read is MISSING:
                if param in required:
                    problems.append(f"{param_label(param)}: this parameter is required")
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
