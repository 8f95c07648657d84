"""A declaration's parameters as text people read: conditions in words, lists
joined, objects as ``key: value`` pairs; JSON only for what has no simpler reading. The chain
panel, the gate's reasons and the trial show parameters this way.
"""

from __future__ import annotations

from typing import Any

from approvals.presentation import conditions_text
from console.hook_editor.param_values import json_text, param_label


def describe_condition(condition: Any) -> str:
    """A ``confirm_when`` condition as people read it, as the condition editor says it back:
    "Amount is at least 50,000" (``approvals.presentation.conditions_text``)."""
    if not isinstance(condition, dict):
        return json_text(condition)
    return conditions_text([condition])


def describe_conditions(params: dict[str, Any]) -> str:
    """The conditions of a ``confirm_when``-like declaration joined by its mode (``all``: and)."""
    conditions = params.get("conditions")
    if not isinstance(conditions, list):
        return ""
    joiner = " or " if params.get("mode") == "any" else " and "
    return joiner.join(describe_condition(c) for c in conditions)


def readable_value(value: Any) -> str:
    """A parameter's value as a line of text: lists joined, objects as ``key: value`` pairs,
    conditions in words; JSON only for what has no simpler reading."""
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
    return json_text(value)


def readable_params(params: dict[str, Any]) -> list[str]:
    """A declaration's parameters as ``Label: value`` lines (the editor's labels)."""
    return [f"{param_label(key)}: {readable_value(value)}" for key, value in params.items()]
