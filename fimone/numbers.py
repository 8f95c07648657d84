"""When a value in a tool call's arguments is a number (docs/design.md §1.16, doubt goes to a person).

Conditions, standing approvals, stages and budgets compare amounts. A service reads "25,000.00",
"25000 USD", "2.5e4" or "25_000" in ways nobody here can know, so such a text is never taken for
a number: it is a value that cannot be compared, and whoever reads it decides what doubt means
(ask a person, or block). A value is a number only when it is one:

* a JSON number (``int`` or a finite ``float``; never a boolean), or
* a string that the tool's schema declares numeric (``"type": "number"`` / ``"integer"``, alone
  or among others, directly or in ``anyOf`` / ``oneOf``) and that spells a plain decimal exactly:
  an optional minus, digits without a leading zero, an optional fraction. No spaces, no ``+``,
  no separators, no units, no exponent, no NaN or Infinity.

A condition's own threshold is written by an operator and checked when saved
(:func:`threshold_of`): there any string spelling a finite number is taken as one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

_PLAIN_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_NUMERIC_TYPES = frozenset({"number", "integer"})


def _finite(number: Decimal) -> Decimal | None:
    return number if number.is_finite() else None


def number_of(value: Any, *, numeric_text: bool = False) -> Decimal | None:
    """``value`` as a ``Decimal`` when it is a number by the rule above, else ``None``.

    ``numeric_text``: whether the tool's schema declares the field numeric
    (:func:`declares_number`); without it a string is never a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return _finite(Decimal(repr(value))) if value == value else None
    if isinstance(value, Decimal):
        return _finite(value)
    if isinstance(value, str) and numeric_text and _PLAIN_DECIMAL.fullmatch(value):
        return Decimal(value)
    return None


def threshold_of(value: Any) -> Decimal | None:
    """An operator's threshold (a condition's ``value``) as a number: a JSON number, or a string
    that spells a finite number (an operator wrote it, and it is checked when saved); ``None``
    otherwise."""
    if isinstance(value, str):
        try:
            return _finite(Decimal(value.strip()))
        except (InvalidOperation, ValueError):
            return None
    return number_of(value)


def field_schema(schema: Any, path: tuple[str, ...]) -> Mapping[str, Any] | None:
    """The part of a JSON schema that describes the argument at ``path`` (object properties, and
    list items for digit parts), or ``None`` when the schema does not describe it."""
    node = schema
    for part in path:
        if not isinstance(node, Mapping):
            return None
        properties = node.get("properties")
        if isinstance(properties, Mapping) and part in properties:
            node = properties[part]
            continue
        items = node.get("items")
        if part.isdigit() and isinstance(items, Mapping):
            node = items
            continue
        return None
    return node if isinstance(node, Mapping) else None


def _types(node: Mapping[str, Any]) -> set[str]:
    declared = node.get("type")
    types = {declared} if isinstance(declared, str) else set()
    if isinstance(declared, list):
        types = set(declared)
    for key in ("anyOf", "oneOf"):
        for option in node.get(key) or ():
            if isinstance(option, Mapping):
                types |= _types(option)
    return {t for t in types if isinstance(t, str)}


def declares_number(node: Mapping[str, Any] | None) -> bool:
    """Whether a field's schema (:func:`field_schema`) admits a number."""
    return node is not None and bool(_types(node) & _NUMERIC_TYPES)
