"""JSON that every supported database stores: what the engine writes can always be written.

A tool may return anything Python can build, and the run's writes must not fail because of it:
an integer over 4,300 digits (``json.dumps`` raises ``ValueError``), NaN or ±Infinity (invalid
JSON, refused by PostgreSQL ``jsonb`` and SQLite's ``JSON_VALID`` check), a string holding
``\\x00`` (refused by ``jsonb`` and by PostgreSQL text columns), a lone surrogate (not UTF-8),
nesting deeper than the encoders allow, cycles, keys or values of other types.

:func:`storable` returns a value with each such part replaced by a short, readable placeholder
(everything else kept as is); :func:`dumps` is ``json.dumps`` of it. Both never raise. The common
case costs one ``json.dumps`` and one regular-expression scan; only a value that needs it is walked.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fimone.storable import UNSTORABLE_CHARS

MAX_DEPTH = 100
"""Deeper containers (only in a value that needed cleaning) are replaced by a placeholder."""

REPLACEMENT = "\ufffd"

# In ensure_ascii output every NUL and every surrogate (paired or not) is a \u escape. A match only
# means "look closer": an escaped backslash followed by "u0000" or a valid pair also match.
_SUSPECT = re.compile(r"\\u0000|\\ud[89a-f]", re.IGNORECASE)
_BAD_CHARS = UNSTORABLE_CHARS  # what edges refuse (fimone.storable) is what is cleaned here


def dumps(value: Any) -> str:
    """``json.dumps`` (ASCII, valid RFC 8259 JSON) of :func:`storable` ``(value)``. Never raises."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return json.dumps(_clean(value, 0), allow_nan=False)
    if _SUSPECT.search(text) is None:
        return text
    return json.dumps(_clean(value, 0), allow_nan=False)


def storable(value: Any) -> Any:
    """``value`` itself when it is storable JSON, otherwise a cleaned copy. Never raises."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return _clean(value, 0)
    if _SUSPECT.search(text) is None:
        return value
    return _clean(value, 0)


def text(value: Any) -> str:
    """``value`` as readable text (a string as is, anything else as JSON), storable. Never raises."""
    if isinstance(value, str):
        return _clean_str(value)
    return json.dumps(storable(value), ensure_ascii=False, allow_nan=False)


def _clean_str(value: str) -> str:
    value = str.__str__(value)  # a str subclass may override __str__; its characters are the data
    return _BAD_CHARS.sub(REPLACEMENT, value) if _BAD_CHARS.search(value) else value


def _clean_int(value: int) -> int | str:
    try:
        int.__repr__(value)
    except ValueError:  # more digits than Python converts to text (sys.get_int_max_str_digits)
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"[integer too large to show: about {digits} digits]"
    return int(value)


def _clean_float(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return float(value)


def _key(key: Any) -> str:
    """An object key as ``json.dumps`` writes it (``1`` → ``"1"``, ``None`` → ``"null"``)."""
    if isinstance(key, str):
        return _clean_str(key)
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    if isinstance(key, int | float):
        cleaned = _clean_int(key) if isinstance(key, int) else _clean_float(key)
        return cleaned if isinstance(cleaned, str) else json.dumps(cleaned)
    return _shown(key)


def _clean(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _clean_str(value)
    if isinstance(value, int):
        return _clean_int(value)
    if isinstance(value, float):
        return _clean_float(value)
    if isinstance(value, dict | list | tuple):
        if depth >= MAX_DEPTH:
            return f"[nested deeper than {MAX_DEPTH} levels: not shown]"
        if isinstance(value, dict):
            return {_key(k): _clean(v, depth + 1) for k, v in value.items()}
        return [_clean(v, depth + 1) for v in value]
    return _shown(value)


def _shown(value: Any) -> str:
    """Any other object as its text (``str()``), cleaned."""
    try:
        shown = str(value)
    except Exception:  # a broken __str__ must not break the run
        shown = f"<unprintable {type(value).__name__}>"
    return _clean_str(shown) if isinstance(shown, str) else f"<unprintable {type(value).__name__}>"
