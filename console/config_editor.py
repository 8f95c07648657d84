"""The agent's model configuration and built-in tools as forms in the admin, not JSON.

The model configuration (``Agent.model_config_json``) is what ``agents.llm.factory.check_model_config``
and the providers read: the provider, its model, its own endpoint, sampling parameters, timeouts and
retries, and the scripted provider's script. Each of those is an input; whatever else the
configuration holds (keys a provider reads that have no input, declarations kept in the JSON) stays
in an "advanced" JSON box, so nothing is lost by saving the form. The built-in tools are checkboxes,
one per tool of ``agents.tools.builtins.BUILTIN_TOOLS``, with their titles.

A post without the inputs (an API client, an older page) is read as before: the field's JSON text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from agents.tools.builtins import BUILTIN_TOOLS
from fimone.forms import JSONFormField
from fimone.parsers import loads as json_loads

PROVIDER_LABELS = {
    "scripted": "Scripted (plays a fixed script; no model is called)",
    "openai": "OpenAI-compatible API",
}


@dataclass(frozen=True)
class ConfigInput:
    """One input of the model configuration: where its value lives in the JSON (``path``), how
    it is typed (``kind``: text, url, number, integer, choice, json) and what it says."""

    name: str
    label: str
    path: tuple[str, ...]
    kind: str
    help: str = ""
    providers: tuple[str, ...] = ()
    """Providers it applies to (empty: all); the page shows it for those only."""


CONFIG_INPUTS: tuple[ConfigInput, ...] = (
    ConfigInput("provider", "Provider", ("provider",), "choice", "Which kind of model answers."),
    ConfigInput(
        "model",
        "Model",
        ("model",),
        "text",
        "The model's name at the provider, e.g. gpt-4o-mini.",
        ("openai",),
    ),
    ConfigInput(
        "base_url",
        "Base URL",
        ("base_url",),
        "url",
        "The model endpoint, e.g. https://llm.example.com/v1. Empty: the platform's endpoint. An "
        "endpoint of its own needs the agent's own API key (Secrets below).",
        ("openai",),
    ),
    ConfigInput(
        "temperature",
        "Temperature",
        ("params", "temperature"),
        "number",
        "0 answers the same way each time; higher varies more. Empty: the provider's default.",
        ("openai",),
    ),
    ConfigInput(
        "max_tokens",
        "Max tokens",
        ("params", "max_tokens"),
        "integer",
        "The longest answer, in tokens. Empty: the provider's default.",
        ("openai",),
    ),
    ConfigInput(
        "timeout", "Timeout (seconds)", ("timeout",), "number", "How long one request may take.", ("openai",)
    ),
    ConfigInput(
        "max_retries",
        "Retries",
        ("max_retries",),
        "integer",
        "How often a failed request (rate limit, server error, timeout) is tried again.",
        ("openai",),
    ),
    ConfigInput(
        "script",
        "Script",
        ("script",),
        "json",
        'The turns the scripted model plays, e.g. {"turns": [{"content": "Hello."}]}.',
        ("scripted",),
    ),
)

_MISSING: Any = object()


def _get(config: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = config
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def _pop(config: dict[str, Any], path: tuple[str, ...]) -> None:
    parent: Any = config
    for key in path[:-1]:
        parent = parent.get(key) if isinstance(parent, dict) else None
    if isinstance(parent, dict):
        parent.pop(path[-1], None)
        if len(path) > 1 and parent == {}:
            _pop(config, path[:-1])


def _set(config: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    parent = config
    for key in path[:-1]:
        if not isinstance(parent.get(key), dict):
            parent[key] = {}
        parent = parent[key]
    parent[path[-1]] = value


def split_config(config: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """``config`` as the inputs show it (texts by input name) and the rest (the advanced JSON)."""
    rest = json.loads(json.dumps(config)) if isinstance(config, dict) else {}
    shown: dict[str, str] = {}
    for spec in CONFIG_INPUTS:
        value = _get(rest, spec.path)
        if value is _MISSING:
            continue
        if spec.kind == "json":
            shown[spec.name] = json.dumps(value, ensure_ascii=False, indent=1)
        elif (
            spec.kind in ("number", "integer")
            and isinstance(value, int | float)
            and not isinstance(value, bool)
        ):
            shown[spec.name] = str(value)
        elif isinstance(value, str):
            shown[spec.name] = value
        else:
            continue  # a value the input cannot show stays in the advanced JSON
        _pop(rest, spec.path)
    return shown, rest


@dataclass
class ModelConfigInput:
    """What the model configuration part of the page posted (``structured``: its inputs)."""

    raw: str
    values: dict[str, str] = field(default_factory=dict)
    advanced: str = ""
    structured: bool = False


class ModelConfigWidget(forms.Widget):
    """The model configuration's inputs (``<name>__<input>``) and its advanced JSON box
    (``<name>__advanced``); the page's script shows the inputs of the provider picked."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> ModelConfigInput:
        result = ModelConfigInput(raw=data.get(name) or "")
        if f"{name}___shown" not in data:
            return result
        result.structured = True
        result.values = {spec.name: data.get(f"{name}__{spec.name}", "") for spec in CONFIG_INPUTS}
        result.advanced = data.get(f"{name}__advanced", "")
        return result

    def id_for_label(self, id_: str) -> str:
        return f"{id_}__provider" if id_ else id_

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        if isinstance(value, ModelConfigInput) and value.structured:
            shown, advanced = value.values, value.advanced
        else:
            text = value.raw if isinstance(value, ModelConfigInput) else value
            stored = text if isinstance(text, dict) else _parsed(text)
            shown, rest = split_config(stored)
            advanced = json.dumps(rest, ensure_ascii=False, indent=1) if rest else ""
        provider = shown.get("provider") or "scripted"
        rows = [_render_input(name, spec, shown.get(spec.name, ""), provider) for spec in CONFIG_INPUTS]
        return format_html(
            '<div class="config-editor" data-name="{}"><input type="hidden" name="{}___shown" value="1">'
            "{}"
            '<details class="config-advanced"{}><summary>Advanced (JSON)</summary><p class="help">Any '
            "other settings, as a JSON object: they are kept as they are, e.g. "
            '<code>{{"retry_max_delay": 30, "params": {{"top_p": 0.9}}}}</code>.</p>'
            '<textarea name="{}__advanced" rows="4" cols="60" spellcheck="false" '
            'aria-label="Advanced settings (JSON)">{}</textarea></details></div>',
            name,
            name,
            mark_safe("".join(rows)),  # noqa: S308  # each row is built by format_html
            mark_safe(" open") if advanced.strip() else "",  # a constant
            name,
            advanced,
        )


def _parsed(text: Any) -> Any:
    try:
        return json_loads(text) if isinstance(text, str) and text.strip() else {}
    except ValueError:
        return {}


def _render_input(name: str, spec: ConfigInput, shown: str, provider: str) -> SafeString:
    input_name = f"{name}__{spec.name}"
    if spec.kind == "choice":
        options = dict(PROVIDER_LABELS)
        if shown and shown not in options:
            options[shown] = shown
        widget = format_html(
            '<select name="{}" id="id_{}">{}</select>',
            input_name,
            input_name,
            format_html_join(
                "",
                '<option value="{}"{}>{}</option>',
                (
                    (v, mark_safe(" selected") if v == (shown or "scripted") else "", t)
                    for v, t in options.items()
                ),
            ),
        )
    elif spec.kind == "json":
        widget = format_html(
            '<textarea name="{}" id="id_{}" rows="4" cols="60" spellcheck="false">{}</textarea>',
            input_name,
            input_name,
            shown,
        )
    else:
        input_type = {"url": "url", "number": "number", "integer": "number"}.get(spec.kind, "text")
        step = mark_safe(' step="any"') if spec.kind == "number" else ""
        widget = format_html(
            '<input type="{}" name="{}" id="id_{}" value="{}"{}>',
            input_type,
            input_name,
            input_name,
            shown,
            step,
        )
    hidden = spec.providers and provider not in spec.providers
    return format_html(
        '<div class="config-input" data-providers="{}"{}><label for="id_{}">{}</label>{}'
        '<div class="help">{}</div></div>',
        " ".join(spec.providers),
        mark_safe(" hidden") if hidden else "",
        input_name,
        spec.label,
        widget,
        spec.help,
    )


def _read(spec: ConfigInput, text: str) -> Any:
    text = (text or "").strip()
    if not text:
        return _MISSING
    if spec.kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("enter a whole number") from None
    if spec.kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError("enter a number") from None
        return int(number) if number.is_integer() and "." not in text else number
    if spec.kind == "json":
        try:
            return json_loads(text)
        except ValueError as exc:
            raise ValueError(f"enter JSON ({exc})") from None
    return text


class ModelConfigField(JSONFormField):
    """The model configuration from its inputs and advanced JSON (or, posted without them, from
    the JSON text as before). Mistakes are told per input."""

    widget = ModelConfigWidget

    def to_python(self, value: Any) -> Any:
        if not isinstance(value, ModelConfigInput):
            return super().to_python(value)
        if not value.structured:
            return super().to_python(value.raw or "{}")
        problems: list[str] = []
        config: dict[str, Any] = {}
        advanced = value.advanced.strip()
        if advanced:
            try:
                parsed = json_loads(advanced)
            except ValueError as exc:
                raise forms.ValidationError(f"Advanced: enter a JSON object ({exc}).") from None
            if not isinstance(parsed, dict):
                raise forms.ValidationError('Advanced: enter a JSON object, e.g. {"retry_max_delay": 30}.')
            config = parsed
        provider = (value.values.get("provider") or "scripted").strip()
        for spec in CONFIG_INPUTS:
            if spec.providers and provider not in spec.providers:
                continue  # the other provider's inputs are not read (the page hides them)
            try:
                read = _read(spec, value.values.get(spec.name, ""))
            except ValueError as exc:
                problems.append(f"{spec.label}: {exc}")
                continue
            if read is not _MISSING:
                _set(config, spec.path, read)
        if problems:
            raise forms.ValidationError(problems)
        return config

    def bound_data(self, data: Any, initial: Any) -> Any:
        return data if isinstance(data, ModelConfigInput) else super().bound_data(data, initial)

    def prepare_value(self, value: Any) -> Any:
        return value if isinstance(value, ModelConfigInput | dict) else super().prepare_value(value)

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial or {})
        except forms.ValidationError:
            return True


# --- built-in tools ---------------------------------------------------------------------------------


@dataclass
class ToolsInput:
    raw: str
    picked: list[str] = field(default_factory=list)
    structured: bool = False


class BuiltinToolsWidget(forms.Widget):
    """A checkbox per built-in tool (its title and what it does); a name stored that no longer
    exists shows too, so that it can be unticked."""

    def id_for_label(self, id_: str) -> str:
        return ""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> ToolsInput:
        if f"{name}___shown" not in data:
            return ToolsInput(raw=data.get(name) or "")
        return ToolsInput(raw="", picked=list(data.getlist(f"{name}__pick")), structured=True)

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        if isinstance(value, ToolsInput):
            picked = value.picked if value.structured else _names(_parsed(value.raw))
        else:
            picked = _names(value if isinstance(value, list) else _parsed(value))
        boxes = []
        for tool_name, tool_class in BUILTIN_TOOLS.items():
            spec = tool_class.spec
            boxes.append((tool_name, spec.display, spec.description, tool_name in picked))
        boxes += [
            (n, n, "Not a built-in tool (any more): untick it.", True)
            for n in picked
            if n not in BUILTIN_TOOLS
        ]
        items = format_html_join(
            "",
            '<li><label><input type="checkbox" name="{}__pick" value="{}"{}> <strong>{}</strong> '
            '<span class="help">{}</span></label></li>',
            ((name, n, mark_safe(" checked") if on else "", title, text) for n, title, text, on in boxes),
        )
        return format_html(
            '<input type="hidden" name="{}___shown" value="1"><ul class="builtin-tools">{}</ul>', name, items
        )


def _names(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


class BuiltinToolsField(JSONFormField):
    """The names ticked, in the catalog's order (or, posted without the boxes, the JSON list)."""

    widget = BuiltinToolsWidget

    def to_python(self, value: Any) -> Any:
        if not isinstance(value, ToolsInput):
            return super().to_python(value)
        if not value.structured:
            return super().to_python(value.raw or "[]")
        return list(dict.fromkeys(value.picked))

    def bound_data(self, data: Any, initial: Any) -> Any:
        return data if isinstance(data, ToolsInput) else super().bound_data(data, initial)

    def prepare_value(self, value: Any) -> Any:
        return value if isinstance(value, ToolsInput | list) else super().prepare_value(value)

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial or [])
        except forms.ValidationError:
            return True
