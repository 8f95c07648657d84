"""The HTML inputs of one parameter (a select, a checkbox, a text box, a number) and of a list
of objects (a table with one row of inputs per object), as the hook editor and the trial's
tool arguments render them. Every value is escaped by ``format_html``.
"""

from __future__ import annotations

from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from approvals.condition_rows import ConditionRowsWidget
from console.hook_editor.param_values import (
    MISSING,
    format_value,
    json_text,
    loose_value,
    param_kind,
    param_label,
)

CONDITION_ROWS = 3
"""Rows offered for a list of objects (``confirm_when`` conditions): at least this many, and always
one empty row beyond those filled."""


def render_input(kind: str, name: str, schema: dict[str, Any], shown: Any, *, label: str) -> SafeString:
    """The input of one parameter of ``kind`` (:func:`param_kind`), showing ``shown``; its schema's
    default is the placeholder."""
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


def render_rows(name: str, schema: dict[str, Any], rows: list[Any], *, label: str, typed: bool) -> SafeString:
    """A list of objects as rows of inputs (``typed``: ``rows`` are the texts posted back)."""
    columns = schema["items"]["properties"]
    head = format_html_join("", "<th>{}</th>", ((param_label(c),) for c in columns))
    body = []
    for index in range(max(CONDITION_ROWS, len(rows) + 1)):
        row = rows[index] if index < len(rows) else {}
        cells = []
        for col, col_schema in columns.items():
            kind = param_kind(col_schema)
            if kind == "json":
                kind = "loose"
            value = row.get(col, MISSING) if isinstance(row, dict) else MISSING
            if typed:
                shown = "" if value is MISSING else value
            elif kind == "loose":
                # A text that would read back as something else ("123", "true") is shown quoted.
                plain = isinstance(value, str) and loose_value(value) == value
                shown = "" if value is MISSING else (value if plain else json_text(value))
            else:
                shown = format_value(kind, value)
            cell_label = f"{label} {index + 1}: {col}"
            input_kind = "text" if kind == "loose" else kind
            cell = render_input(input_kind, f"{name}__{index}__{col}", col_schema, shown, label=cell_label)
            cells.append(format_html("<td>{}</td>", cell))
        body.append(format_html("<tr>{}</tr>", mark_safe("".join(cells))))  # noqa: S308
    return format_html(
        '<table class="hook-param-rows"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
        head,
        mark_safe("".join(body)),  # noqa: S308
    )


def render_param(
    kind: str, name: str, schema: Any, shown: Any, *, label: str, required: bool, help_text: str, typed: bool
) -> SafeString:
    """One parameter as the editor lays it out: its label (starred when ``required``), its input
    showing ``shown`` (a list of objects: a table of rows, ``typed`` as in :func:`render_rows`),
    and ``help_text`` under it."""
    if kind == "rows":
        widget = render_rows(name, schema, shown or [], label=label, typed=typed)
    elif kind == "conditions":
        widget = ConditionRowsWidget().render(name, shown or [])
    else:
        widget = render_input(kind, name, schema, shown, label=label)
    return format_html(
        '<div class="hook-param"><label>{}{}</label> {}<div class="help">{}</div></div>',
        label,
        mark_safe(' <span class="required" title="required">*</span>') if required else "",
        widget,
        help_text,
    )
