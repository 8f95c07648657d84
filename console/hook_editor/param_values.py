"""One parameter of the hook editor: which input its schema calls for, how a typed value reads
into the declaration (or a tool call), and how a stored value shows in its input.

Shared by the hook parameters and the trial's tool arguments: both are JSON-schema properties
typed into one input each.
"""

from __future__ import annotations

import json
from typing import Any

from approvals.condition_rows import ConditionRowsWidget
from fimone.parsers import loads as json_loads

MISSING: Any = object()
"""A parameter left blank: not written into the declaration (the hook's default applies)."""


def _is_patterns(schema: dict[str, Any]) -> bool:
    options = schema.get("oneOf")
    if not isinstance(options, list):
        return False
    types = {o.get("type") for o in options if isinstance(o, dict)}
    return types == {"string", "array"}


CONDITION_COLUMNS = frozenset({"field", "op", "value"})
"""A list of objects with exactly these properties is a list of conditions on a call's arguments
(``hooks.conditions``): the one condition editor shows it (``approvals.condition_rows``)."""


def param_kind(schema: Any) -> str:
    """The input for a property schema: choice, integer, number, boolean, text, patterns (one
    per line), conditions (rows of field, operator in words and value), rows (another list of
    objects), or json (anything else)."""
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
        return "conditions" if set(items["properties"]) == CONDITION_COLUMNS else "rows"
    return "json"


def param_label(name: str) -> str:
    """A parameter's name as its input's label: ``max_amount`` → ``Max amount``."""
    return name.replace("_", " ").capitalize()


def json_text(value: Any) -> str:
    """``value`` as JSON text, non-ASCII kept as typed."""
    return json.dumps(value, ensure_ascii=False)


def loose_value(text: str) -> Any:
    """A value typed where anything goes: JSON if it reads as JSON (50000, true, ["a"]), else
    the text itself (also when it nests deeper than the bounded reader accepts)."""
    try:
        return json_loads(text)
    except ValueError:
        return text


def read_value(kind: str, schema: dict[str, Any], raw: Any) -> Any:
    """The value typed for one parameter, ``MISSING`` if left blank, or ``ValueError`` saying
    what is expected in an operator's words."""
    if kind == "boolean":
        return raw == "on" if raw is not None else MISSING
    if kind == "rows":
        return raw if raw else MISSING
    if kind == "conditions":
        return _read_conditions(raw)
    text = (raw or "").strip() if isinstance(raw, str) else ""
    if not text:
        return MISSING
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


def _read_conditions(raw: Any) -> Any:
    """The condition rows' JSON text (``ConditionRowsWidget``) as the list it holds, ``MISSING``
    when no row is filled, or ``ValueError`` naming the row that gives a field and no value."""
    rows = json_loads(raw) if isinstance(raw, str) and raw.strip() else raw
    if not rows:
        return MISSING
    for number, row in enumerate(rows, start=1):
        if row.get("value") in ("", None, []):
            raise ValueError(f"condition {number}: give a value for “{row.get('field')}”")
        if not row.get("field"):
            raise ValueError(f"condition {number}: pick the field it is on")
    return rows


def format_value(kind: str, value: Any) -> Any:
    """A stored parameter as its input shows it."""
    if value is MISSING or value is None:
        return "" if kind not in ("rows", "conditions", "boolean") else (None if kind == "boolean" else [])
    if kind == "patterns":
        return "\n".join(value) if isinstance(value, list) else str(value)
    if kind in ("integer", "number", "text", "choice"):
        return str(value) if not isinstance(value, bool) else json_text(value)
    if kind == "boolean":
        return "on" if value else None
    if kind in ("rows", "conditions"):
        return value if isinstance(value, list) else []
    return json_text(value)


def posted_rows(data: Any, base: str, schema: dict[str, Any]) -> list[dict[str, str]]:
    """The rows of a list-of-objects parameter as posted (``<base>__<n>__<column>``), each a
    ``column → text`` mapping, in order, until the first row the page did not post."""
    columns = list(schema["items"]["properties"])
    rows = []
    index = 0
    while any(f"{base}__{index}__{col}" in data for col in columns):
        rows.append({col: data.get(f"{base}__{index}__{col}", "") for col in columns})
        index += 1
    return rows


def read_rows(schema: dict[str, Any], rows: list[dict[str, str]]) -> Any:
    """The posted rows of a list-of-objects parameter as its value: blank rows skipped, each
    column read by its own schema (free-form columns loosely), ``MISSING`` when no row is
    filled, or ``ValueError`` naming the row and column."""
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
                item[col] = loose_value(text)
            else:
                try:
                    item[col] = read_value(kind, col_schema, text)
                except ValueError as exc:
                    raise ValueError(f"row {number}: {col}: {exc}") from None
        out.append(item)
    return out if out else MISSING


def posted_values(data: Any, base: str, properties: dict[str, Any]) -> dict[str, Any]:
    """What the page posted for each of ``properties`` (inputs named ``<base><property>``), as
    typed: a list of objects' rows (:func:`posted_rows`), a checkbox's ``"on"`` or ``None`` when
    unticked, else the text (``""`` when not posted). Read into values by :func:`read_posted`."""
    values: dict[str, Any] = {}
    for prop, schema in properties.items():
        kind = param_kind(schema)
        if kind == "rows":
            values[prop] = posted_rows(data, f"{base}{prop}", schema)
        elif kind == "conditions":
            values[prop] = ConditionRowsWidget().value_from_datadict(data, None, f"{base}{prop}")
        elif kind == "boolean":
            values[prop] = data.get(f"{base}{prop}")
        else:
            values[prop] = data.get(f"{base}{prop}", "")
    return values


def read_posted(schema: Any, raw: Any) -> Any:
    """One property's posted input (as :func:`posted_values` keeps it) as its value: ``MISSING``
    when left blank, or ``ValueError`` saying what is expected in an operator's words."""
    kind = param_kind(schema)
    if kind == "rows":
        return read_rows(schema, raw or [])
    return read_value(kind, schema if isinstance(schema, dict) else {}, raw)
